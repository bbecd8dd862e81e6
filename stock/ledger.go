package stock

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"seckill/lua"
	"seckill/sale"
)

// The reconciler's and the rebuild's view of Redis: atomic counters, the
// user records and claimed set, and the repairs that are provably safe (see
// package reconcile for when each one is used).

var (
	ledgerScript  = rueidis.NewLuaScript(lua.Ledger)
	restoreScript = rueidis.NewLuaScript(lua.Restore)
	settleScript  = rueidis.NewLuaScript(lua.Settle)
	rebuildScript = rueidis.NewLuaScript(lua.Rebuild)
	reindexScript = rueidis.NewLuaScript(lua.Reindex)
)

// Ledger is one SKU's counters read in one atomic step.
type Ledger struct {
	Present bool // the meta key exists (false: Redis lost the SKU, or it was never preheated)
	Counts
}

// Ledger reads the counters of (activity, sku) atomically. Like the other
// methods of this file it routes by sku.Hot, not by the catalog, which may
// be what Redis lost. For a SKU split into buckets it is the sum of
// BucketLedgers (each bucket read atomically, not the SKU as a whole):
// Present only when every bucket is, InFlight the units debited and not
// yet credited, so Initial = Remaining + InFlight + Sold when the books
// add up.
func (s *Stock) Ledger(ctx context.Context, activity int64, sku *sale.SKU) (Ledger, error) {
	if sku.Split() {
		per, err := s.BucketLedgers(ctx, activity, sku)
		if err != nil {
			return Ledger{}, err
		}
		return SumLedgers(per), nil
	}
	return s.ledgerIn(ctx, activity, sku, sale.NoBucket)
}

// SumLedgers is the ledger of a SKU split into buckets from its buckets'
// (BucketLedgers): the sums, Present only when every bucket is, InFlight
// the units debited and not yet credited.
func SumLedgers(per []Ledger) Ledger {
	sum := Ledger{Present: true}
	for _, l := range per {
		sum.Present = sum.Present && l.Present
		c := &sum.Counts
		c.Initial, c.Remaining, c.Sold = c.Initial+l.Initial, c.Remaining+l.Remaining, c.Sold+l.Sold
		c.Holders, c.Claimed, c.Pending = c.Holders+l.Holders, c.Claimed+l.Claimed, c.Pending+l.Pending
		c.In, c.Out = c.In+l.In, c.Out+l.Out
	}
	sum.InFlight = sum.Out - sum.In
	return sum
}

// BucketLedgers reads the counters of every bucket of a SKU split into
// buckets, each in one atomic step with its transfer totals (In, Out): a
// bucket's books add up when Initial + In − Out = Remaining + Sold.
func (s *Stock) BucketLedgers(ctx context.Context, activity int64, sku *sale.SKU) ([]Ledger, error) {
	out := make([]Ledger, 0, sku.BucketCount())
	for _, b := range sku.BucketIndexes() {
		l, err := s.ledgerIn(ctx, activity, sku, b)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// ledgerIn reads bucket b's counters (the SKU's own for sale.NoBucket).
func (s *Stock) ledgerIn(ctx context.Context, activity int64, sku *sale.SKU, b int) (Ledger, error) {
	k := sale.KeysIn(activity, sku.ID, b)
	keys := []string{k.Meta, k.Stock, k.Users, k.Sold, k.Claim}
	want := 6
	if b >= 0 {
		keys, want = append(keys, sale.TransfersKey(activity, sku.ID, b)), 8
	}
	v, err := ledgerScript.Exec(ctx, s.recordsClient(activity, sku, b), keys, nil).AsIntSlice()
	if err != nil {
		return Ledger{}, fmt.Errorf("ledger activity %d sku %d bucket %d: %w", activity, sku.ID, b, err)
	}
	if len(v) != want {
		return Ledger{}, fmt.Errorf("ledger activity %d sku %d bucket %d: %d values, want %d", activity, sku.ID, b, len(v), want)
	}
	l := Ledger{Present: v[0] == 1, Counts: Counts{Initial: v[1], Remaining: v[2], Sold: v[3], Holders: v[4],
		Claimed: v[5], Pending: v[4] - v[5]}}
	if b >= 0 {
		l.Out, l.In = v[6], v[7]
	}
	return l, nil
}

// recordsClient is the client of bucket b of sku routed by sku itself, not
// the catalog (skuClient for sale.NoBucket).
func (s *Stock) recordsClient(activity int64, sku *sale.SKU, b int) rueidis.Client {
	if b < 0 {
		return s.skuClient(activity, sku)
	}
	return s.bucketClient(activity, sku, b)
}

// Records are a SKU's user records, claimed requestNos, the units of its
// tickets (SKUs of several units per ticket) and its pending journal.
type Records struct {
	Users   map[int64]string // userId -> requestNo
	Claimed map[string]bool
	Units   map[string]int64 // requestNo -> units (the qty hash)
	// Pending holds the tickets the pending journal's entries name, by
	// PendingMember, each with its entry's accept time: every unclaimed
	// record, and tickets claimed or released since their entry was
	// written.
	Pending map[string]PendingTicket
}

// UnitsOf returns the units ticket requestNo holds: the recorded units,
// else 1 on a SKU of one unit per ticket (limit ≤ 1). false: not known — a
// ticket of a SKU that sells several units per ticket without a recorded
// quantity (taken before quantities were recorded).
func (r Records) UnitsOf(requestNo string, limit int64) (int64, bool) {
	if q, ok := r.Units[requestNo]; ok {
		return q, true
	}
	if limit <= 1 {
		return 1, true
	}
	return 0, false
}

// Records scans the user records, the claimed set, the units and the
// pending journal of (activity, sku) with HSCAN/SSCAN/ZSCAN, so a large SKU
// does not block its shard; of a SKU split into buckets, the union of its
// buckets' (a buyer's record lives in one bucket and a ticket number names
// its bucket, so nothing collides). Its cost grows with every holder the
// SKU ever had: only the reconciler's full comparison, on its own interval,
// reads it. The scan is not atomic: a record added or removed while it
// runs may be missed.
func (s *Stock) Records(ctx context.Context, activity int64, sku *sale.SKU) (Records, error) {
	out := Records{Users: map[int64]string{}, Claimed: map[string]bool{}, Units: map[string]int64{},
		Pending: map[string]PendingTicket{}}
	for _, b := range sku.BucketIndexes() {
		if err := s.recordsIn(ctx, activity, sku, b, &out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// recordsIn adds bucket b's records to out (the SKU's own for
// sale.NoBucket).
func (s *Stock) recordsIn(ctx context.Context, activity int64, sku *sale.SKU, b int, out *Records) error {
	k := sale.KeysIn(activity, sku.ID, b)
	c := s.recordsClient(activity, sku, b)
	var cursor uint64
	for {
		e, err := c.Do(ctx, c.B().Hscan().Key(k.Users).Cursor(cursor).Count(1000).Build()).AsScanEntry()
		if err != nil {
			return fmt.Errorf("records activity %d sku %d: %w", activity, sku.ID, err)
		}
		for i := 0; i+1 < len(e.Elements); i += 2 {
			u, err := strconv.ParseInt(e.Elements[i], 10, 64)
			if err != nil {
				return fmt.Errorf("records activity %d sku %d: user %q: %w", activity, sku.ID, e.Elements[i], err)
			}
			out.Users[u] = e.Elements[i+1]
		}
		if cursor = e.Cursor; cursor == 0 {
			break
		}
	}
	for {
		e, err := c.Do(ctx, c.B().Sscan().Key(k.Claim).Cursor(cursor).Count(1000).Build()).AsScanEntry()
		if err != nil {
			return fmt.Errorf("claimed activity %d sku %d: %w", activity, sku.ID, err)
		}
		for _, rn := range e.Elements {
			out.Claimed[rn] = true
		}
		if cursor = e.Cursor; cursor == 0 {
			break
		}
	}
	for {
		e, err := c.Do(ctx, c.B().Hscan().Key(k.Qty).Cursor(cursor).Count(1000).Build()).AsScanEntry()
		if err != nil {
			return fmt.Errorf("units activity %d sku %d: %w", activity, sku.ID, err)
		}
		for i := 0; i+1 < len(e.Elements); i += 2 {
			q, err := strconv.ParseInt(e.Elements[i+1], 10, 64)
			if err != nil {
				return fmt.Errorf("units activity %d sku %d: %q: %w", activity, sku.ID, e.Elements[i+1], err)
			}
			out.Units[e.Elements[i]] = q
		}
		if cursor = e.Cursor; cursor == 0 {
			break
		}
	}
	for {
		e, err := c.Do(ctx, c.B().Zscan().Key(k.Pending).Cursor(cursor).Count(1000).Build()).AsScanEntry()
		if err != nil {
			return fmt.Errorf("pending activity %d sku %d: %w", activity, sku.ID, err)
		}
		for i := 0; i+1 < len(e.Elements); i += 2 {
			ms, err := strconv.ParseFloat(e.Elements[i+1], 64)
			if err != nil {
				return fmt.Errorf("pending activity %d sku %d: score %q: %w", activity, sku.ID, e.Elements[i+1], err)
			}
			for _, t := range parseEntry(nil, e.Elements[i], ms) {
				out.Pending[PendingMember(t.UserID, t.RequestNo)] = t
			}

		}
		if cursor = e.Cursor; cursor == 0 {
			break
		}
	}
	return nil
}

// Holder returns the requestNo holding user's record on (activity, sku)
// ("" when none) and whether it is claimed for an order.
func (s *Stock) Holder(ctx context.Context, activity, sku, user int64) (requestNo string, claimed bool, err error) {
	b := sale.NoBucket
	if _, ks, ok := s.cat.Lookup(activity, sku); ok {
		b = ks.BucketOf(user) // the user's record lives in its bucket
	}
	k := sale.KeysIn(activity, sku, b)
	c := s.shards.Client(s.shardIn(activity, sku, b))
	rn, err := c.Do(ctx, c.B().Hget().Key(k.Users).Field(strconv.FormatInt(user, 10)).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("holder activity %d sku %d user %d: %w", activity, sku, user, err)
	}
	claimed, err = c.Do(ctx, c.B().Sismember().Key(k.Claim).Member(rn).Build()).AsBool()
	if err != nil {
		return rn, false, fmt.Errorf("holder activity %d sku %d user %d: %w", activity, sku, user, err)
	}
	return rn, claimed, nil
}

// holdersIn appends to dst the requestNos bucket b of sku holds for the
// users named by fields ("" for none).
func (s *Stock) holdersIn(ctx context.Context, activity int64, sku *sale.SKU, b int, fields, dst []string) ([]string, error) {
	c := s.bucketClient(activity, sku, b)
	vs, err := c.Do(ctx, c.B().Hmget().Key(sale.KeysIn(activity, sku.ID, b).Users).Field(fields...).Build()).ToArray()
	if err != nil {
		return dst, fmt.Errorf("holders activity %d sku %d: %w", activity, sku.ID, err)
	}
	if len(vs) != len(fields) {
		return dst, fmt.Errorf("holders activity %d sku %d: %d values for %d users", activity, sku.ID, len(vs), len(fields))
	}
	for _, v := range vs {
		rn, err := v.ToString()
		if err != nil && !rueidis.IsRedisNil(err) {
			return dst, fmt.Errorf("holders activity %d sku %d: %w", activity, sku.ID, err)
		}
		dst = append(dst, rn)
	}
	return dst, nil
}

// Hold is a live order's claim on its SKU: the record a rebuild or a
// restore writes back (or a closed order's, for the closed hash).
type Hold struct {
	UserID    int64
	RequestNo string
	Quantity  int64 // units; recorded in the qty hash on SKUs of limit > 1
}

// holdArgs appends userId, requestNo pairs.
func holdArgs(dst []string, hs []Hold) []string {
	for _, h := range hs {
		dst = append(dst, strconv.FormatInt(h.UserID, 10), h.RequestNo)
	}
	return dst
}

// recordArgs appends userId, requestNo, units triples; units is 0 (not
// recorded) on a SKU of one unit per ticket, like occupy does.
func recordArgs(dst []string, sku *sale.SKU, hs []Hold) []string {
	for _, h := range hs {
		q := int64(0)
		if sku.LimitPerUser > 1 {
			q = max(h.Quantity, 1)
		}
		dst = append(dst, strconv.FormatInt(h.UserID, 10), h.RequestNo, strconv.FormatInt(q, 10))
	}
	return dst
}

// RestoreRecords writes back the claimed records of live orders Redis lost,
// except where the user holds another record; counters are unchanged. It
// returns how many were restored.
func (s *Stock) RestoreRecords(ctx context.Context, activity int64, sku *sale.SKU, hs []Hold) (int64, error) {
	if !sku.Split() {
		return s.restoreIn(ctx, activity, sku, sale.NoBucket, hs)
	}
	// A buyer's record lives in its bucket (sale.SKU.BucketOf).
	var n int64
	part := make([]Hold, 0, len(hs))
	for b := 0; b < sku.Buckets; b++ {
		part = part[:0]
		for _, h := range hs {
			if sku.BucketOf(h.UserID) == b {
				part = append(part, h)
			}
		}
		if len(part) == 0 {
			continue
		}
		m, err := s.restoreIn(ctx, activity, sku, b, part)
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// restoreIn is RestoreRecords on bucket b (the SKU's own keys for
// sale.NoBucket).
func (s *Stock) restoreIn(ctx context.Context, activity int64, sku *sale.SKU, b int, hs []Hold) (int64, error) {
	k := sale.KeysIn(activity, sku.ID, b)
	c := s.recordsClient(activity, sku, b)
	var n int64
	for len(hs) > 0 {
		part := hs[:min(len(hs), 1000)]
		hs = hs[len(part):]
		v, err := restoreScript.Exec(ctx, c, []string{k.Users, k.Claim, k.Qty},
			recordArgs(make([]string, 0, 3*len(part)), sku, part)).AsInt64()
		if err != nil {
			return n, fmt.Errorf("restore records activity %d sku %d bucket %d: %w", activity, sku.ID, b, err)
		}
		n += v
	}
	return n, nil
}

// Settle outcomes.
const (
	SettleDone   = "SETTLED"
	SettleStale  = "STALE"
	SettleNotOne = "NOT_ONE"
	SettleLedger = "LEDGER"
)

// Settle makes a one-unit-per-ticket SKU's sold counter equal its user
// records (see settle.lua), if sold is still seenSold. It returns the
// script's code and the units moved to the remaining stock (negative: taken
// from it). Units moved back on sale publish "available". It is SettleIn
// of the SKU's own keys.
func (s *Stock) Settle(ctx context.Context, activity int64, sku *sale.SKU, seenSold int64) (string, int64, error) {
	return s.SettleIn(ctx, activity, sku, sale.NoBucket, seenSold)
}

// SettleIn is Settle of bucket b of a SKU split into buckets: the bucket's
// sold counter made equal its records, if its books balance (initial +
// credited − debited = remaining + sold).
func (s *Stock) SettleIn(ctx context.Context, activity int64, sku *sale.SKU, b int, seenSold int64) (string, int64, error) {
	k := sale.KeysIn(activity, sku.ID, b)
	keys := []string{k.Meta, k.Stock, k.Users, k.Sold}
	if b >= 0 {
		keys = append(keys, sale.TransfersKey(activity, sku.ID, b))
	}
	vals, err := settleScript.Exec(ctx, s.recordsClient(activity, sku, b), keys,
		[]string{strconv.FormatInt(seenSold, 10)}).ToArray()
	if err != nil || len(vals) != 2 {
		return "", 0, fmt.Errorf("settle activity %d sku %d bucket %d: %v", activity, sku.ID, b, err)
	}
	code, _ := vals[0].ToString()
	moved, _ := vals[1].AsInt64()
	if moved > 0 {
		s.publish(ctx, sale.Event{Kind: sale.EventAvailable, Activity: activity, SKU: sku.ID})
	}
	return code, moved, nil
}

// Rebuild writes SKU sku of activity a back into Redis after Redis lost it
// (its meta key is missing), in one atomic script: remaining = initial −
// ordered, sold = ordered, a claimed record (and its units, on a SKU of
// several units per ticket) for every live order, the close
// of every order closed unpaid (closed hash), then the meta that makes it
// sellable (with a's rebuy switch). initial and ordered are units; holds are
// the live orders, closed the closed ones. It reports false when the meta
// key exists (another process was first): nothing changed then. The
// catalog is not touched.
func (s *Stock) Rebuild(ctx context.Context, a *sale.Activity, sku *sale.SKU, initial, ordered int64, holds, closed []Hold) (bool, error) {
	k := sale.KeysFor(a.ID, sku.ID)
	code, err := rebuildScript.Exec(ctx, s.skuClient(a.ID, sku),
		[]string{k.Meta, k.Stock, k.Users, k.Sold, k.Claim, k.Closed, k.Qty, k.Pending},
		rebuildArgs(a, sku, initial, ordered, nil, nil, holds, closed)).ToString()
	if err != nil {
		return false, fmt.Errorf("rebuild activity %d sku %d: %w", a.ID, sku.ID, err)
	}
	if code != "REBUILT" {
		return false, nil
	}
	if initial > ordered {
		s.publish(ctx, sale.Event{Kind: sale.EventAvailable, Activity: a.ID, SKU: sku.ID})
	} else {
		s.publish(ctx, sale.Event{Kind: sale.EventSoldOut, Activity: a.ID, SKU: sku.ID})
	}
	return true, nil
}

// rebuildArgs is rebuild.lua's ARGV: the meta of a (with extra meta pairs
// after it), the transfer-record pairs xfer (a bucket's), the live orders'
// records and the closes.
func rebuildArgs(a *sale.Activity, sku *sale.SKU, initial, ordered int64, extra, xfer []string, holds, closed []Hold) []string {
	meta := []string{
		"status", a.State,
		"start_ms", strconv.FormatInt(a.Start.UnixMilli(), 10),
		"end_ms", strconv.FormatInt(a.End.UnixMilli(), 10),
		"limit", strconv.FormatInt(max(sku.LimitPerUser, 1), 10),
		"price", strconv.FormatInt(int64(sku.Price), 10),
		"activity", strconv.FormatInt(a.ID, 10),
		"rebuy", rebuyField(a),
	}
	meta = append(meta, extra...)
	args := make([]string, 0, 5+len(meta)+len(xfer)+3*len(holds)+2*len(closed))
	args = append(args, strconv.FormatInt(initial, 10), strconv.FormatInt(ordered, 10),
		strconv.Itoa(len(meta)/2), strconv.Itoa(len(holds)), strconv.Itoa(len(xfer)/2))
	args = append(args, meta...)
	args = append(args, xfer...)
	args = recordArgs(args, sku, holds)
	return holdArgs(args, closed)
}

// HoldersOf sets dst[i] to the requestNo holding users[i]'s record on
// (activity, sku), "" where the user holds none: one HMGET, for the
// reconciler's check of the orders made since its last pass. dst is
// reused when it has room.
func (s *Stock) HoldersOf(ctx context.Context, activity int64, sku *sale.SKU, users []int64, dst []string) ([]string, error) {
	dst = dst[:0]
	if len(users) == 0 {
		return dst, nil
	}
	fields := make([]string, len(users))
	for i, u := range users {
		fields[i] = strconv.FormatInt(u, 10)
	}
	if !sku.Split() {
		return s.holdersIn(ctx, activity, sku, sale.NoBucket, fields, dst)
	}
	// Each user's record is in its bucket: one read per bucket, answers
	// put back in the users' order.
	dst = append(dst, make([]string, len(users))...)
	var fs []string
	var idx []int
	for b := 0; b < sku.Buckets; b++ {
		fs, idx = fs[:0], idx[:0]
		for i, u := range users {
			if sku.BucketOf(u) == b {
				fs, idx = append(fs, fields[i]), append(idx, i)
			}
		}
		if len(fs) == 0 {
			continue
		}
		got, err := s.holdersIn(ctx, activity, sku, b, fs, nil)
		if err != nil {
			return dst[:0], err
		}
		for j, i := range idx {
			dst[i] = got[j]
		}
	}
	return dst, nil
}
