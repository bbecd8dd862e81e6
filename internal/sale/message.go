package sale

import (
	"encoding/json"
	"fmt"
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
}

// Encode appends m's JSON to dst.
func (m *Message) Encode(dst []byte) []byte {
	b, _ := json.Marshal(m) // cannot fail: plain fields
	return append(dst, b...)
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

// OrderNo derives the order number from the ticket, so that a redelivered
// message always names the same order.
func OrderNo(requestNo string) string { return "O" + requestNo }

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
