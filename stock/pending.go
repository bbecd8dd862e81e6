package stock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"seckill/sale"
)

// The pending index (DESIGN §5, sk:{a…:s…}:pending): a sorted set of every
// user record not claimed yet, member "userId:requestNo", score the accept
// time in Redis server milliseconds. The occupy script adds a ticket in the
// call that takes its stock; claim and release remove it in theirs. So the
// orphan sweeper reads only the unclaimed tickets older than its grace
// period — work that grows with what is pending, not with every buyer the
// SKU ever had. A ticket taken by a binary older than the index is not in
// it until the reconciler's full comparison puts it there (Reindex).

// PendingTicket is one entry of the pending index.
type PendingTicket struct {
	UserID    int64
	RequestNo string
	// At is the accept time: Redis server time when the occupy script took
	// the stock (the requestNo's time for an entry Reindex added).
	At time.Time
	// Units the ticket holds, from the qty hash; 0 where not recorded (a
	// SKU of one unit per ticket records none). Read by Pending only.
	Units int64
}

// PendingMember is the index member of userId's ticket requestNo, as the
// scripts build it.
func PendingMember(user int64, requestNo string) string {
	return strconv.FormatInt(user, 10) + ":" + requestNo
}

// parsePending reads one member and its score (ms).
func parsePending(member string, ms float64) (PendingTicket, error) {
	u, rn, ok := strings.Cut(member, ":")
	user, err := strconv.ParseInt(u, 10, 64)
	if !ok || err != nil || rn == "" {
		return PendingTicket{}, fmt.Errorf("pending member %q is not userId:requestNo", member)
	}
	return PendingTicket{UserID: user, RequestNo: rn, At: time.UnixMilli(int64(ms))}, nil
}

// Pending reads one page of the pending index of (activity, sku): the
// entries accepted before before (by Redis server time), oldest first,
// skipping the first offset of them, at most count — one ZRANGEBYSCORE with
// a LIMIT, plus, on a SKU of several units per ticket, one HMGET of their
// units. read is how many entries the page held, the malformed ones
// (skipped) included, for the caller's next offset. Like the other ledger
// reads it routes by sku.Hot.
func (s *Stock) Pending(ctx context.Context, activity int64, sku *sale.SKU, before time.Time, offset, count int) (ts []PendingTicket, read int, err error) {
	return s.PendingIn(ctx, activity, sku, sale.NoBucket, before, offset, count)
}

// PendingIn is Pending of bucket b of a SKU split into buckets (each
// bucket has its own index; sale.NoBucket is the SKU's own).
func (s *Stock) PendingIn(ctx context.Context, activity int64, sku *sale.SKU, b int, before time.Time, offset, count int) (ts []PendingTicket, read int, err error) {
	k := sale.KeysIn(activity, sku.ID, b)
	c := s.bucketClient(activity, sku, b)
	hi := "(" + strconv.FormatInt(before.UnixMilli(), 10)
	vals, err := c.Do(ctx, c.B().Zrangebyscore().Key(k.Pending).Min("-inf").Max(hi).
		Withscores().Limit(int64(offset), int64(count)).Build()).AsZScores()
	if err != nil {
		return nil, 0, fmt.Errorf("pending activity %d sku %d: %w", activity, sku.ID, err)
	}
	ts = make([]PendingTicket, 0, len(vals))
	for _, v := range vals {
		t, err := parsePending(v.Member, v.Score)
		if err != nil {
			continue // not written by the scripts (a hand edit): ignored
		}
		ts = append(ts, t)
	}
	if sku.LimitPerUser > 1 && len(ts) > 0 {
		rns := make([]string, len(ts))
		for i, t := range ts {
			rns[i] = t.RequestNo
		}
		qs, err := c.Do(ctx, c.B().Hmget().Key(k.Qty).Field(rns...).Build()).ToArray()
		if err != nil {
			return nil, 0, fmt.Errorf("pending units activity %d sku %d: %w", activity, sku.ID, err)
		}
		for i := range ts {
			if i < len(qs) {
				if q, err := qs[i].AsInt64(); err == nil {
					ts[i].Units = q
				}
			}
		}
	}
	return ts, len(vals), nil
}

// Reindex makes the pending index of (activity, sku) agree with the user
// records for tickets ts (reindex.lua, judged atomically per ticket): a
// record that is not claimed is added under its At (an entry present keeps
// its time), an entry whose record is gone, names another ticket or is
// claimed is removed. It returns how many entries it added and removed.
func (s *Stock) Reindex(ctx context.Context, activity int64, sku *sale.SKU, ts []PendingTicket) (added, removed int64, err error) {
	if !sku.Split() {
		return s.reindexIn(ctx, activity, sku, sale.NoBucket, ts)
	}
	// Each ticket's entry is in the index of the bucket its number names.
	var part []PendingTicket
	for b := 0; b < sku.Buckets; b++ {
		part = part[:0]
		for _, t := range ts {
			if sale.TicketBucket(t.RequestNo) == b {
				part = append(part, t)
			}
		}
		if len(part) == 0 {
			continue
		}
		a, r, err := s.reindexIn(ctx, activity, sku, b, part)
		added, removed = added+a, removed+r
		if err != nil {
			return added, removed, err
		}
	}
	return added, removed, nil
}

// reindexIn is Reindex on bucket b (the SKU's own keys for sale.NoBucket).
func (s *Stock) reindexIn(ctx context.Context, activity int64, sku *sale.SKU, b int, ts []PendingTicket) (added, removed int64, err error) {
	k := sale.KeysIn(activity, sku.ID, b)
	for len(ts) > 0 {
		part := ts[:min(len(ts), 1000)]
		ts = ts[len(part):]
		args := make([]string, 0, 3*len(part))
		for _, t := range part {
			args = append(args, strconv.FormatInt(t.UserID, 10), t.RequestNo, strconv.FormatInt(t.At.UnixMilli(), 10))
		}
		v, err := reindexScript.Exec(ctx, s.recordsClient(activity, sku, b), []string{k.Users, k.Claim, k.Pending}, args).AsIntSlice()
		if err != nil || len(v) != 2 {
			return added, removed, fmt.Errorf("reindex activity %d sku %d bucket %d: %v (%d values)", activity, sku.ID, b, err, len(v))
		}
		added += v[0]
		removed += v[1]
	}
	return added, removed, nil
}
