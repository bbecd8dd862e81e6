package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// DeadLetter is a message the consumer set aside (DESIGN §6): sent to the
// dead-letter topic, or — when that topic refused it — quarantined in
// seckill_dead_letter, so that its offset can be committed either way.
type DeadLetter struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Key       []byte `json:"key,omitempty"`
	// Payload is the message's value, its first MaxDeadLetterPayload
	// bytes at most; Size and Digest (hex SHA-256) are of the whole value.
	Payload []byte `json:"payload"`
	Size    int64  `json:"size"`
	Digest  string `json:"digest"`
	Reason  string `json:"reason"` // cut to 255 bytes
	// RequestNo is the ticket the message names, when it decoded to one
	// in the engine's form (sale.ParseRequestNo) — signed or not: an
	// attribution, not a proof. Its history gets a DEAD_LETTERED step.
	RequestNo string `json:"requestNo,omitempty"`
	// Quarantined: the dead-letter topic refused the letter; it is kept
	// in seckill_dead_letter.
	Quarantined bool      `json:"-"`
	Created     time.Time `json:"created"`
}

// MaxDeadLetterPayload and MaxDeadLetterKey bound what a dead letter
// keeps of a message's value and key.
const (
	MaxDeadLetterPayload = 16 << 10
	MaxDeadLetterKey     = 1 << 10
)

// EventDeadLettered is the history step of a ticket a dead-lettered
// message named (its remark the reason). History only: the request log's
// state is left to whoever ends the ticket (the sweeper, for a message the
// consumer could not trust).
const EventDeadLettered = "DEAD_LETTERED"

// DeadLettered makes SaveBatch record letters in its transaction: each
// quarantined one as a row of seckill_dead_letter (once per topic,
// partition and offset: a redelivered batch adds none), and a
// DEAD_LETTERED step in the history of each ticket a letter names.
// SaveBatch with no messages and this option records only the letters.
func DeadLettered(letters []DeadLetter) SaveOption {
	return func(o *saveOptions) { o.letters = append(o.letters, letters...) }
}

const deadLetterCols = 10

var deadLetterInsertSQL = shape{per: deadLetterCols, sql: func(d *dialect, n int) string {
	return d.insertIgnore + ` seckill_dead_letter (topic, msg_partition, msg_offset, msg_key, payload,
		size_bytes, digest, reason, request_no, created_ms) VALUES ` + marks(n, deadLetterCols)
}}

// recordLetters writes b.opt.letters inside tx.
func (s *sqlStore) recordLetters(ctx context.Context, tx *sql.Tx, letters []DeadLetter) error {
	now := s.nowMs()
	var rows []any
	var evs []Event
	for i := range letters {
		l := &letters[i]
		reason := text(l.Reason, maxRemark)
		if l.Quarantined {
			rows = append(rows, text(l.Topic, maxTopic), l.Partition, l.Offset, head(l.Key, MaxDeadLetterKey),
				head(l.Payload, MaxDeadLetterPayload), l.Size, text(l.Digest, 64), reason, text(l.RequestNo, maxRequestNo), now)
		}
		if l.RequestNo != "" && len(l.RequestNo) <= maxRequestNo {
			evs = append(evs, Event{RequestNo: l.RequestNo, Status: EventDeadLettered, Remark: reason})
		}
	}
	if len(rows) > 0 {
		if _, err := s.execRows(ctx, tx, &deadLetterInsertSQL, rows); err != nil {
			return fmt.Errorf("quarantine %d dead letters: %w", len(rows)/deadLetterCols, err)
		}
	}
	if len(evs) > 0 {
		return s.insertEvents(ctx, tx, evs)
	}
	return nil
}

func (s *sqlStore) QuarantinedLetters(ctx context.Context, limit int) ([]DeadLetter, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.r.QueryContext(ctx, `SELECT topic, msg_partition, msg_offset, msg_key, payload, size_bytes,
		digest, reason, request_no, created_ms FROM seckill_dead_letter ORDER BY id LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("quarantined letters: %w", err)
	}
	defer rows.Close()
	var out []DeadLetter
	for rows.Next() {
		var l DeadLetter
		var created int64
		if err := rows.Scan(&l.Topic, &l.Partition, &l.Offset, &l.Key, &l.Payload, &l.Size, &l.Digest,
			&l.Reason, &l.RequestNo, &created); err != nil {
			return nil, fmt.Errorf("quarantined letters: %w", err)
		}
		l.Quarantined, l.Created = true, time.UnixMilli(created)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("quarantined letters: %w", err)
	}
	return out, nil
}

// Widths of seckill_dead_letter's text columns.
const (
	maxTopic     = 249 // Kafka's longest topic name
	maxRequestNo = 64
)

// text is s made fit for a text column: UTF-8 (whatever a hostile message
// held) and at most n bytes. Free text must never fail a batch.
func text(s string, n int) string {
	return cut(strings.ToValidUTF8(s, "\uFFFD"), n)
}

func head(b []byte, n int) []byte {
	if b == nil {
		return []byte{} // the columns are NOT NULL
	}
	return b[:min(len(b), n)]
}
