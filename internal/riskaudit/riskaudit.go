// Package riskaudit keeps the purchases that went through the edge without
// a risk verdict — the risk service timed out, failed or its circuit
// breaker was open, and the activity's policy let the local rules decide —
// so that they are re-checked once the service is back, and so that
// on-call can list them (`seckill admin risk unchecked`). The records live
// on the default Redis: a hash of every record and a sorted set of the
// pending ones (by time), written in one round trip; they are bounded by
// the tickets issued during an outage (at most the stock sold then) and
// expire Retention after the last one.
package riskaudit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// Redis keys on the default Redis.
const (
	RecordsKey = "sk:risk:unchecked" // hash requestNo -> Record (JSON)
	PendingKey = "sk:risk:pending"   // sorted set of requestNos not re-checked yet, by Record.At (ms)
)

// Retention is how long the records live after the last one was added.
const Retention = 7 * 24 * time.Hour

// States of a record.
const (
	Pending = "pending" // not re-checked yet
	Allowed = "allow"   // the re-check allowed it
	Denied  = "deny"    // the re-check refused it (see Record.Action)
)

// Record is one purchase that passed without a verdict.
type Record struct {
	RequestNo string `json:"requestNo"`
	User      int64  `json:"userId"`
	Activity  int64  `json:"activityId"`
	SKU       int64  `json:"skuId"`
	Quantity  int64  `json:"quantity"`
	IP        string `json:"ip"`
	Device    string `json:"deviceId,omitempty"`
	// Why is why there was no verdict: timeout, error or open (breaker).
	Why string `json:"why"`
	At  int64  `json:"atMs"` // when the purchase passed, unix ms
	// State is Pending, Allowed or Denied; CheckedAt when it was decided.
	State     string `json:"state"`
	CheckedAt int64  `json:"checkedAtMs,omitempty"`
	// Action says what the edge did about a refused purchase.
	Action string `json:"action,omitempty"`
}

// Add records r as pending.
func Add(ctx context.Context, rdb rueidis.Client, r Record) error {
	r.State = Pending
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	cmds := rueidis.Commands{
		rdb.B().Hset().Key(RecordsKey).FieldValue().FieldValue(r.RequestNo, string(b)).Build(),
		rdb.B().Zadd().Key(PendingKey).ScoreMember().ScoreMember(float64(r.At), r.RequestNo).Build(),
		rdb.B().Expire().Key(RecordsKey).Seconds(int64(Retention / time.Second)).Build(),
		rdb.B().Expire().Key(PendingKey).Seconds(int64(Retention / time.Second)).Build(),
	}
	for _, res := range rdb.DoMulti(ctx, cmds...) {
		if err := res.Error(); err != nil {
			return fmt.Errorf("record unchecked purchase %s: %w", r.RequestNo, err)
		}
	}
	return nil
}

// Oldest returns up to n pending records, oldest first. A pending entry
// whose record is gone is dropped from the pending set.
func Oldest(ctx context.Context, rdb rueidis.Client, n int) ([]Record, error) {
	rns, err := rdb.Do(ctx, rdb.B().Zrange().Key(PendingKey).Min("0").Max(strconv.Itoa(n-1)).Build()).AsStrSlice()
	if err != nil || len(rns) == 0 {
		if err != nil {
			err = fmt.Errorf("pending unchecked purchases: %w", err)
		}
		return nil, err
	}
	vals, err := rdb.Do(ctx, rdb.B().Hmget().Key(RecordsKey).Field(rns...).Build()).ToArray()
	if err != nil {
		return nil, fmt.Errorf("pending unchecked purchases: %w", err)
	}
	out := make([]Record, 0, len(rns))
	for i, v := range vals {
		s, err := v.ToString()
		var r Record
		if err != nil || json.Unmarshal([]byte(s), &r) != nil {
			// Gone (or unreadable): nothing to re-check.
			if zerr := rdb.Do(ctx, rdb.B().Zrem().Key(PendingKey).Member(rns[i]).Build()).Error(); zerr != nil {
				return nil, fmt.Errorf("drop pending %s: %w", rns[i], zerr)
			}
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// Resolve writes the re-check's outcome of r (State Allowed or Denied,
// CheckedAt, Action) and takes it off the pending set.
func Resolve(ctx context.Context, rdb rueidis.Client, r Record) error {
	if r.State != Allowed && r.State != Denied {
		return errors.New("riskaudit: resolve needs state allow or deny")
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	cmds := rueidis.Commands{
		rdb.B().Hset().Key(RecordsKey).FieldValue().FieldValue(r.RequestNo, string(b)).Build(),
		rdb.B().Zrem().Key(PendingKey).Member(r.RequestNo).Build(),
	}
	for _, res := range rdb.DoMulti(ctx, cmds...) {
		if err := res.Error(); err != nil {
			return fmt.Errorf("resolve unchecked purchase %s: %w", r.RequestNo, err)
		}
	}
	return nil
}

// List returns up to limit records in state ("" for any), oldest first,
// and how many records there are in all. It scans the hash, which holds
// at most the tickets of the outages of the last Retention.
func List(ctx context.Context, rdb rueidis.Client, state string, limit int) ([]Record, int64, error) {
	total, err := rdb.Do(ctx, rdb.B().Hlen().Key(RecordsKey).Build()).AsInt64()
	if err != nil {
		return nil, 0, fmt.Errorf("unchecked purchases: %w", err)
	}
	var out []Record
	var cursor uint64
	for {
		e, err := rdb.Do(ctx, rdb.B().Hscan().Key(RecordsKey).Cursor(cursor).Count(500).Build()).AsScanEntry()
		if err != nil {
			return nil, 0, fmt.Errorf("unchecked purchases: %w", err)
		}
		for i := 1; i < len(e.Elements); i += 2 {
			var r Record
			if json.Unmarshal([]byte(e.Elements[i]), &r) != nil || state != "" && r.State != state {
				continue
			}
			out = append(out, r)
		}
		cursor = e.Cursor
		if cursor == 0 {
			break
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At < out[j].At })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, total, nil
}
