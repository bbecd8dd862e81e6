// Package jsontext holds the JSON string syntax the hand-written decoders
// share: the edge's order-body scanner and the consumer's order-message
// decoder (sale). It allocates nothing of its own.
package jsontext

import (
	"unicode/utf16"
	"unicode/utf8"
)

// Hex4 decodes the four hex digits b starts with, or returns -1.
func Hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// AppendUnescaped appends raw, the contents of a JSON string (between its
// quotes), to dst with its escapes decoded. dst may be raw[:0]: every
// escape is at least as long as what it decodes to, so writing never
// overtakes reading. A lone surrogate becomes U+FFFD, as encoding/json
// decodes it — or, with strict, is refused (it would be a second spelling
// of U+FFFD). ok is false for a bad or cut escape.
func AppendUnescaped(dst, raw []byte, strict bool) (out []byte, ok bool) {
	for r := 0; r < len(raw); {
		c := raw[r]
		if c != '\\' {
			dst = append(dst, c)
			r++
			continue
		}
		if r+1 >= len(raw) {
			return dst, false
		}
		switch raw[r+1] {
		case '"', '\\', '/':
			dst = append(dst, raw[r+1])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			u := Hex4(raw[r+2:])
			if u < 0 {
				return dst, false
			}
			r += 6
			if utf16.IsSurrogate(u) {
				u2 := rune(-1)
				if r+6 <= len(raw) && raw[r] == '\\' && raw[r+1] == 'u' {
					u2 = Hex4(raw[r+2:])
				}
				if d := utf16.DecodeRune(u, u2); d != utf8.RuneError {
					u = d
					r += 6
				} else if strict {
					return dst, false
				} else {
					u = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, u)
			continue
		default:
			return dst, false
		}
		r += 2
	}
	return dst, true
}
