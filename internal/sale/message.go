package sale

import (
	"encoding/json"
	"fmt"
	"strconv"
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
	// key and the hex HMAC-SHA256 of the canonical bytes (Encode). Encode
	// leaves them out; Signer.AppendSigned writes them.
	KeyID string `json:"keyId,omitempty"`
	Sig   string `json:"sig,omitempty"`
}

// Encode appends m's JSON without the signature fields to dst: the bytes
// json.Marshal(m) gives for an unsigned m, without its reflection and
// allocations (it runs once per accepted buyer). These are the canonical
// bytes a signature covers (Signer).
func (m *Message) Encode(dst []byte) []byte {
	dst = append(dst, `{"requestNo":`...)
	dst = appendJSONString(dst, m.RequestNo)
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
	dst = appendJSONString(dst, m.TraceID)
	return append(dst, '}')
}

// appendJSONString appends s quoted as encoding/json quotes it. Plain
// printable ASCII (the usual requestNo and trace id) is copied as is; any
// other string takes encoding/json's own path, so escaping never differs.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always marshals
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// DecodeMessage parses and checks a message.
func DecodeMessage(b []byte) (Message, error) {
	var m Message
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("decode order message: %w", err)
	}
	if m.RequestNo == "" || m.ActivityID <= 0 || m.SKUID <= 0 || m.UserID <= 0 || m.Quantity <= 0 {
		return m, fmt.Errorf("decode order message: missing or invalid field in %q", truncate(b, 200))
	}
	return m, nil
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
