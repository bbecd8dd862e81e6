package edge

import (
	"errors"
	"unicode/utf8"

	"seckill/internal/jsontext"
)

// order is a parsed purchase body. Token and RequestID alias the request
// body (unescaped in place) and are valid only while the handler runs.
type order struct {
	ActivityID int64 // 0: not given, resolve the SKU's current activity
	SKUID      int64
	Quantity   int64 // 1 when not given
	Token      []byte
	RequestID  []byte
}

// Limits of the order body.
const (
	maxQuantity     = 100
	maxTokenLen     = 1024
	maxRequestIDLen = 64
	maxDepth        = 32 // nesting of skipped unknown values
	maxIntDigits    = 18 // every 18-digit decimal fits int64
)

// Parse failures; each maps to one 400 body in answers.go (parseAnswer).
var (
	errMalformed     = errors.New("malformed JSON body")
	errDuplicate     = errors.New("duplicate field")
	errBadActivityID = errors.New("activityId must be a positive integer")
	errBadSKUID      = errors.New("skuId must be a positive integer")
	errBadQuantity   = errors.New("quantity must be an integer from 1 to 100")
	errBadString     = errors.New("token and requestId must be strings")
	errTooLong       = errors.New("token or requestId too long")
	errBadText       = errors.New("requestId and X-Trace-Id must be UTF-8 without control characters")
)

// Known fields, as bits of the seen-set.
const (
	fActivityID = 1 << iota
	fSKUID
	fQuantity
	fToken
	fRequestID
)

// parseOrder reads a flat JSON object into o without allocating. It accepts
// whitespace, any field order, unknown fields with any (validated) value,
// escapes in keys and strings, null for an absent optional field, and ids
// and quantity as JSON integers or as strings holding one. It refuses
// invalid JSON, trailing data and a known field given twice (decoders
// disagree on which copy wins, which is how smuggled values slip past one
// check and into another). parseOrder unescapes strings in place, so b is
// modified.
func parseOrder(b []byte, o *order) error {
	*o = order{}
	p := scanner{b: b}
	p.ws()
	if !p.eat('{') {
		return errMalformed
	}
	var seen uint8
	p.ws()
	if !p.eat('}') {
		for {
			ks, ke, esc, ok := p.str()
			if !ok {
				return errMalformed
			}
			p.ws()
			if !p.eat(':') {
				return errMalformed
			}
			p.ws()
			f := fieldOf(b[ks:ke], esc)
			if f != 0 {
				if seen&f != 0 {
					return errDuplicate
				}
				seen |= f
			}
			var err error
			switch f {
			case fActivityID:
				o.ActivityID, _, err = p.integer(errBadActivityID)
			case fSKUID:
				o.SKUID, _, err = p.integer(errBadSKUID)
			case fQuantity:
				var present bool
				o.Quantity, present, err = p.integer(errBadQuantity)
				if err == nil && present && (o.Quantity < 1 || o.Quantity > maxQuantity) {
					err = errBadQuantity
				}
			case fToken:
				o.Token, err = p.text(maxTokenLen)
			case fRequestID:
				o.RequestID, err = p.text(maxRequestIDLen)
				if err == nil && !plainText(o.RequestID) {
					err = errBadText
				}
			default:
				if !p.skip(0) {
					err = errMalformed
				}
			}
			if err != nil {
				return err
			}
			p.ws()
			if p.eat(',') {
				p.ws()
				continue
			}
			if p.eat('}') {
				break
			}
			return errMalformed
		}
	}
	p.ws()
	if p.i != len(b) {
		return errMalformed
	}
	switch {
	case o.SKUID <= 0:
		return errBadSKUID
	case o.ActivityID < 0:
		return errBadActivityID
	}
	if o.Quantity == 0 {
		o.Quantity = 1
	}
	return nil
}

// fieldOf names a key. A key written with escapes is decoded into a stack
// buffer first, so "sku\u0049d" is skuId, as any JSON decoder reads it.
func fieldOf(k []byte, esc bool) uint8 {
	if esc {
		if len(k) > 64 {
			return 0
		}
		var buf [64]byte
		n := copy(buf[:], k)
		k = buf[:unescape(buf[:n])]
	}
	switch string(k) { // no allocation: the compiler compares in place
	case "activityId":
		return fActivityID
	case "skuId":
		return fSKUID
	case "quantity":
		return fQuantity
	case "token":
		return fToken
	case "requestId":
		return fRequestID
	}
	return 0
}

// scanner walks b; i is the next unread byte.
type scanner struct {
	b []byte
	i int
}

func (p *scanner) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *scanner) eat(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *scanner) lit(s string) bool {
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

// str reads a string at i and returns its contents' bounds and whether it
// holds escapes.
func (p *scanner) str() (start, end int, esc, ok bool) {
	if !p.eat('"') {
		return 0, 0, false, false
	}
	start = p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			end = p.i
			p.i++
			return start, end, esc, true
		case c == '\\':
			esc = true
			if p.i+1 >= len(p.b) {
				return 0, 0, false, false
			}
			switch p.b[p.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i += 2
			case 'u':
				if p.i+6 > len(p.b) || jsontext.Hex4(p.b[p.i+2:p.i+6]) < 0 {
					return 0, 0, false, false
				}
				p.i += 6
			default:
				return 0, 0, false, false
			}
		case c < 0x20:
			return 0, 0, false, false
		default:
			p.i++
		}
	}
	return 0, 0, false, false
}

// number reads a JSON number at i. integral is false when it has a fraction
// or exponent; v is its value when integral and at most maxIntDigits long
// (big is true past that).
func (p *scanner) number() (v int64, integral, big, ok bool) {
	neg := p.eat('-')
	if p.i >= len(p.b) {
		return 0, false, false, false
	}
	integral = true
	switch c := p.b[p.i]; {
	case c == '0':
		p.i++
	case c >= '1' && c <= '9':
		n := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			if n < maxIntDigits {
				v = v*10 + int64(p.b[p.i]-'0')
			} else {
				big = true
			}
			n++
			p.i++
		}
	default:
		return 0, false, false, false
	}
	if p.eat('.') {
		integral = false
		if !p.digits() {
			return 0, false, false, false
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		integral = false
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if !p.digits() {
			return 0, false, false, false
		}
	}
	if neg {
		v = -v
	}
	return v, integral, big, true
}

func (p *scanner) digits() bool {
	s := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	return p.i > s
}

// integer reads an integer field: a JSON integer, a string holding one, or
// null (present false). Any other value, a fraction or an out-of-range
// number is bad.
func (p *scanner) integer(bad error) (v int64, present bool, err error) {
	if p.i >= len(p.b) {
		return 0, false, errMalformed
	}
	switch c := p.b[p.i]; {
	case c == 'n':
		if !p.lit("null") {
			return 0, false, errMalformed
		}
		return 0, false, nil
	case c == '"':
		s, e, esc, ok := p.str()
		if !ok {
			return 0, false, errMalformed
		}
		if esc || s == e {
			return 0, false, bad
		}
		q := scanner{b: p.b[s:e]}
		v, integral, big, ok := q.number()
		if !ok || !integral || big || q.i != len(q.b) {
			return 0, false, bad
		}
		return v, true, nil
	case c == '-' || c >= '0' && c <= '9':
		v, integral, big, ok := p.number()
		if !ok {
			return 0, false, errMalformed
		}
		if !integral || big {
			return 0, false, bad
		}
		return v, true, nil
	}
	// A value of another type: still has to be valid JSON to earn a 400
	// that names the field rather than the body.
	if !p.skip(0) {
		return 0, false, errMalformed
	}
	return 0, false, bad
}

// text reads a string field (or null) of at most max bytes once unescaped.
func (p *scanner) text(max int) ([]byte, error) {
	if p.i < len(p.b) && p.b[p.i] == 'n' {
		if !p.lit("null") {
			return nil, errMalformed
		}
		return nil, nil
	}
	if p.i < len(p.b) && p.b[p.i] != '"' {
		if !p.skip(0) {
			return nil, errMalformed
		}
		return nil, errBadString
	}
	s, e, esc, ok := p.str()
	if !ok {
		return nil, errMalformed
	}
	v := p.b[s:e]
	if esc {
		v = v[:unescape(v)]
	}
	if len(v) > max {
		return nil, errTooLong
	}
	return v, nil
}

// plainText reports whether b is UTF-8 without control characters (C0,
// DEL, C1): what an id that travels in the order message, the request log
// and the logs may hold. It does not allocate.
func plainText(b []byte) bool {
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 || r >= 0x80 && r <= 0x9f {
			return false
		}
		i += n
	}
	return true
}

// skip reads and validates any JSON value at i.
func (p *scanner) skip(depth int) bool {
	if p.i >= len(p.b) || depth > maxDepth {
		return false
	}
	switch c := p.b[p.i]; {
	case c == '{':
		p.i++
		p.ws()
		if p.eat('}') {
			return true
		}
		for {
			if _, _, _, ok := p.str(); !ok {
				return false
			}
			p.ws()
			if !p.eat(':') {
				return false
			}
			p.ws()
			if !p.skip(depth + 1) {
				return false
			}
			p.ws()
			if p.eat('}') {
				return true
			}
			if !p.eat(',') {
				return false
			}
			p.ws()
		}
	case c == '[':
		p.i++
		p.ws()
		if p.eat(']') {
			return true
		}
		for {
			if !p.skip(depth + 1) {
				return false
			}
			p.ws()
			if p.eat(']') {
				return true
			}
			if !p.eat(',') {
				return false
			}
			p.ws()
		}
	case c == '"':
		_, _, _, ok := p.str()
		return ok
	case c == 't':
		return p.lit("true")
	case c == 'f':
		return p.lit("false")
	case c == 'n':
		return p.lit("null")
	case c == '-' || c >= '0' && c <= '9':
		_, _, _, ok := p.number()
		return ok
	}
	return false
}

// unescape decodes the escapes of a string's contents, already validated
// by str, in place and returns the new length. Every escape is at least as
// long as what it decodes to, so writing never overtakes reading. Bad
// surrogates become U+FFFD, as encoding/json does.
func unescape(b []byte) int {
	out, _ := jsontext.AppendUnescaped(b[:0], b, false)
	return len(out)
}
