package sale

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"seckill/internal/jsontext"
)

// Topics (DESIGN §6).
const (
	OrdersTopic = "seckill.orders"
	DLQTopic    = "seckill.orders.dlq"
)

// Message is the order message the engine produces once stock is occupied.
// It is keyed by userId on the orders topic.
type Message struct {
	RequestNo  string `json:"requestNo"`
	ActivityID int64  `json:"activityId"`
	SKUID      int64  `json:"skuId"`
	UserID     int64  `json:"userId"`
	Quantity   int64  `json:"quantity"`
	UnitPrice  Cents  `json:"unitPrice"`
	AcceptedAt int64  `json:"acceptedAt"` // unix milliseconds
	TraceID    string `json:"traceId"`
	// KeyID and Sig are the engine's signature (Signer): the id of the
	// key and the hex HMAC-SHA256 of the signed bytes. Encode leaves them
	// out; Signer.AppendSigned writes them.
	KeyID string `json:"keyId,omitempty"`
	Sig   string `json:"sig,omitempty"`

	// signed is the length of the wire bytes DecodeMessage read before
	// `,"keyId":` (0: not decoded from a signed message). Signer.Verify
	// checks the signature over those bytes and a closing brace.
	signed int
}

// Encode appends m's JSON without the signature fields to dst, the fields
// in the one order the decoder reads (DecodeMessage), without reflection
// or allocation (it runs once per accepted buyer). Strings are written as
// they are, but for '"', '\\' and control characters, which are escaped,
// and bytes that are not UTF-8, each written as \ufffd (encoding/json's
// replacement): what the consumer decodes is what the bytes say, and the
// signature covers exactly these bytes (Signer).
func (m *Message) Encode(dst []byte) []byte {
	dst = append(dst, `{"requestNo":`...)
	dst = appendString(dst, m.RequestNo)
	dst = append(dst, `,"activityId":`...)
	dst = strconv.AppendInt(dst, m.ActivityID, 10)
	dst = append(dst, `,"skuId":`...)
	dst = strconv.AppendInt(dst, m.SKUID, 10)
	dst = append(dst, `,"userId":`...)
	dst = strconv.AppendInt(dst, m.UserID, 10)
	dst = append(dst, `,"quantity":`...)
	dst = strconv.AppendInt(dst, m.Quantity, 10)
	dst = append(dst, `,"unitPrice":"`...)
	dst = m.UnitPrice.Append(dst)
	dst = append(dst, `","acceptedAt":`...)
	dst = strconv.AppendInt(dst, m.AcceptedAt, 10)
	dst = append(dst, `,"traceId":`...)
	dst = appendString(dst, m.TraceID)
	return append(dst, '}')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string (see Encode).
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			if _, n := utf8.DecodeRuneInString(s[i:]); n > 1 {
				i += n
				continue
			}
		}
		dst = append(dst, s[start:i]...)
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default: // a byte that is not UTF-8
			dst = append(dst, `\ufffd`...)
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// ErrMessageShape is DecodeMessage's error for bytes that are not one
// order message in its one shape.
var ErrMessageShape = errors.New("decode order message: not an order message")

// DecodeMessage parses and checks a message: a strict decoder of the one
// shape Encode and Signer.AppendSigned write, {"requestNo":…,
// "activityId":…, "skuId":…, "userId":…, "quantity":…, "unitPrice":"…",
// "acceptedAt":…, "traceId":…} optionally followed by ,"keyId":…,"sig":…
// before the brace — those members in that order, no whitespace, each
// number in its shortest spelling (unitPrice as Cents.Append writes it),
// strings of UTF-8 with JSON's escapes (a lone surrogate refused). Every
// input it accepts, encoding/json reads to the same fields; it refuses
// whatever encoding/json refuses, and more (FuzzDecodeMessage). The
// consumer decodes each message once, with this; the signature then
// covers the bytes as they came (Signer.Verify), never a re-encoding.
func DecodeMessage(b []byte) (Message, error) {
	m, err := parseMessage(b)
	if err != nil {
		return m, fmt.Errorf("%w: %q", err, truncate(b, 200))
	}
	if m.RequestNo == "" || m.ActivityID <= 0 || m.SKUID <= 0 || m.UserID <= 0 || m.Quantity <= 0 {
		return m, fmt.Errorf("decode order message: missing or invalid field in %q", truncate(b, 200))
	}
	return m, nil
}

// parseMessage reads the shape of DecodeMessage, without its value checks.
func parseMessage(b []byte) (Message, error) {
	var m Message
	d := msgDecoder{b: b}
	ok := d.lit(`{"requestNo":`) && d.str(&m.RequestNo) &&
		d.lit(`,"activityId":`) && d.int(&m.ActivityID) &&
		d.lit(`,"skuId":`) && d.int(&m.SKUID) &&
		d.lit(`,"userId":`) && d.int(&m.UserID) &&
		d.lit(`,"quantity":`) && d.int(&m.Quantity) &&
		d.lit(`,"unitPrice":"`) && d.cents(&m.UnitPrice) &&
		d.lit(`","acceptedAt":`) && d.int(&m.AcceptedAt) &&
		d.lit(`,"traceId":`) && d.str(&m.TraceID)
	if !ok {
		return Message{}, ErrMessageShape
	}
	if d.lit(`}`) && d.i == len(b) {
		return m, nil
	}
	signed := d.i
	ok = d.lit(`,"keyId":`) && d.str(&m.KeyID) && d.lit(`,"sig":`) && d.str(&m.Sig) &&
		d.lit(`}`) && d.i == len(b)
	if !ok {
		return Message{}, ErrMessageShape
	}
	m.signed = signed
	return m, nil
}

// msgDecoder walks b; i is the next unread byte.
type msgDecoder struct {
	b []byte
	i int
}

func (d *msgDecoder) lit(s string) bool {
	if len(d.b)-d.i >= len(s) && string(d.b[d.i:d.i+len(s)]) == s {
		d.i += len(s)
		return true
	}
	return false
}

// int reads an integer as strconv.AppendInt writes it: no '+', no leading
// zero, no "-0", within int64.
func (d *msgDecoder) int(v *int64) bool {
	s := d.i
	if d.i < len(d.b) && d.b[d.i] == '-' {
		d.i++
	}
	ds := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	digits := d.b[ds:d.i]
	if len(digits) == 0 || len(digits) > 1 && digits[0] == '0' || len(digits) > 19 ||
		ds > s && len(digits) == 1 && digits[0] == '0' {
		return false
	}
	n, err := strconv.ParseInt(string(d.b[s:d.i]), 10, 64) // no allocation: the conversion does not escape
	if err != nil {
		return false
	}
	*v = n
	return true
}

// cents reads a price as Cents.Append writes it: [-]units.dd, no leading
// zero, no "-0.00".
func (d *msgDecoder) cents(c *Cents) bool {
	neg := d.i < len(d.b) && d.b[d.i] == '-'
	if neg {
		d.i++
	}
	ws := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	whole := d.b[ws:d.i]
	if len(whole) == 0 || len(whole) > 1 && whole[0] == '0' || len(whole) > 17 {
		return false
	}
	if len(d.b)-d.i < 3 || d.b[d.i] != '.' || !isDigit(d.b[d.i+1]) || !isDigit(d.b[d.i+2]) {
		return false
	}
	var v uint64 // 17 digits and two more fit; the int64 bound is checked below
	for _, ch := range whole {
		v = v*10 + uint64(ch-'0')
	}
	v = v*100 + uint64(d.b[d.i+1]-'0')*10 + uint64(d.b[d.i+2]-'0')
	if v > math.MaxInt64 {
		return false
	}
	d.i += 3
	if neg {
		if v == 0 {
			return false
		}
		*c = -Cents(v)
		return true
	}
	*c = Cents(v)
	return true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// str reads a JSON string of UTF-8. Without escapes the string is one
// conversion of the bytes; with them it is decoded into a buffer first.
func (d *msgDecoder) str(v *string) bool {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return false
	}
	d.i++
	s := d.i
	esc := false
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			raw := d.b[s:d.i]
			d.i++
			if !esc {
				if !utf8.Valid(raw) {
					return false
				}
				*v = string(raw)
				return true
			}
			return unquote(raw, v)
		case c == '\\':
			esc = true
			d.i += 2 // checked by unquote
		case c < 0x20:
			return false
		default:
			d.i++
		}
	}
	return false
}

// unquote decodes raw, a string's contents holding escapes, into v: only
// UTF-8, only JSON's escapes, a surrogate only in a pair.
func unquote(raw []byte, v *string) bool {
	if !utf8.Valid(raw) {
		return false
	}
	buf, ok := jsontext.AppendUnescaped(make([]byte, 0, len(raw)), raw, true)
	if !ok {
		return false
	}
	*v = string(buf)
	return true
}

// OrderNo is the number of the order made from ticket requestNo: "O"
// followed by the requestNo (README, "Numbers"). Derived, not drawn, so
// that a redelivered message always names the same order.
func OrderNo(requestNo string) string { return "O" + requestNo }

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
