package stock

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"seckill/lua"
	"seckill/sale"
)

var bucketStateScript = rueidis.NewLuaScript(lua.BucketState)

// bucketState is what bucket_state.lua read of one bucket; to, from and
// flight are its transfers with each lost bucket, in the order asked.
type bucketState struct {
	present          bool
	initial          int64
	soldOut          bool
	in, out          int64
	sumFrom, sumTo   int64
	to, from, flight []int64
}

// ErrBucketsMoving: the buckets of a SKU changed between the two reads of
// a rebuild (another process rebuilt one, or one more was lost): nothing
// was written; the next watch tries again.
var ErrBucketsMoving = errors.New("buckets changed while the rebuild read them")

// RebuildBuckets writes back, each in one atomic script (rebuild.lua), the
// buckets of sku that Redis lost (their meta is missing) while the others
// may still sell, and answers the buckets it rebuilt. initial is the SKU's
// initial stock (the database snapshot's), holds its live orders and
// closed its orders closed unpaid (oldest first); each belongs to the
// bucket its ticket number names.
//
// The units are those no surviving bucket holds and no transfer carries:
// every surviving bucket s holds initial_s + in_s − out_s (its books), so
// the lost buckets together hold
//
//	initial − Σ initial_s + Σ over lost L (in_L − out_L)
//
// where a lost bucket's transfers are read from their mirrors on the
// survivors, which recorded each unit they sent toward L ("to:L") and
// received from L ("from:L"): in_L = Σ to:L − what is still in flight
// toward L (the survivors' "f:" entries naming L, credited after the
// rebuild by FinishTransfers, whatever L had already applied before the
// loss), out_L = Σ from:L. A debit of L not yet credited when L was lost is
// gone with L's record: its units are L's again. Transfers between
// survivors never enter the sum, so the survivors keep selling and
// rebalancing while it is read. Of those units, the live orders naming a
// lost bucket are its sold units and claimed records; the rest is spread
// over the lost buckets as evenly as possible, and each one's initial is
// what balances its books, with its transfers with the survivors written
// back as they recorded them (so a later loss of another bucket finds its
// mirrors here). Occupancies held in a lost bucket are gone with it, as
// for a SKU that is not split (Rebuild); an order committed after the
// database was read is the same accepted case (FAIL SOLD_OUT at the
// snapshot, never an oversell). A transfer whose credit from a lost bucket
// lands on a survivor after that survivor was read — a reply still on its
// way seconds after the loss — would count its units twice; the watcher's
// two checks in a row keep the rebuild that far behind the loss, and the
// database's conditional decrement refuses any unit the SKU does not have.
//
// A survivor whose transfer record predates the per-bucket counters (in or
// out without them) cannot tell its transfers with the lost buckets: the
// rebuild refuses (fail closed), for an operator.
func (s *Stock) RebuildBuckets(ctx context.Context, a *sale.Activity, sku *sale.SKU, initial int64, holds, closed []Hold) ([]int, error) {
	if !sku.Split() {
		return nil, fmt.Errorf("rebuild buckets of sku %d: not split", sku.ID)
	}
	// Transfers left in flight between survivors are finished first (fewer
	// entries to read); one toward a lost bucket is refused and stays.
	_, _ = s.FinishTransfers(ctx, a.ID, sku)
	first, err := s.bucketStates(ctx, a.ID, sku, nil)
	if err != nil {
		return nil, err
	}
	var lost []int
	for b, st := range first {
		if !st.present {
			lost = append(lost, b)
		}
	}
	if len(lost) == 0 {
		return nil, nil
	}
	states, err := s.bucketStates(ctx, a.ID, sku, lost)
	if err != nil {
		return nil, err
	}
	var (
		survivors int64 // Σ initial_s
		soldOut   bool
		in        = make([]int64, len(lost))
		out       = make([]int64, len(lost))
		pairs     = make([][]string, len(lost))
	)
	for b, st := range states {
		if st.present != first[b].present {
			return nil, fmt.Errorf("rebuild buckets of sku %d: bucket %d: %w", sku.ID, b, ErrBucketsMoving)
		}
		if !st.present {
			continue
		}
		if st.sumFrom != st.in || st.sumTo != st.out {
			return nil, fmt.Errorf("rebuild buckets of sku %d: bucket %d records transfers without the per-bucket counters (in %d, from %d; out %d, to %d): %w",
				sku.ID, b, st.in, st.sumFrom, st.out, st.sumTo, ErrStateLost)
		}
		survivors += st.initial
		soldOut = soldOut || st.soldOut
		for j := range lost {
			landed := st.to[j] - st.flight[j] // debited toward lost[j] and settled: it held them
			in[j] += landed
			out[j] += st.from[j]
			if landed != 0 {
				pairs[j] = append(pairs[j], "from:"+strconv.Itoa(b), strconv.FormatInt(landed, 10))
			}
			if st.from[j] != 0 {
				pairs[j] = append(pairs[j], "to:"+strconv.Itoa(b), strconv.FormatInt(st.from[j], 10))
			}
		}
	}
	at := make(map[int]int, len(lost)) // bucket → its index in lost
	for j, b := range lost {
		at[b] = j
	}
	ordered := make([]int64, len(lost))
	live := make([][]Hold, len(lost))
	gone := make([][]Hold, len(lost))
	for _, h := range holds {
		if j, ok := at[holdBucket(sku, h)]; ok {
			ordered[j] += h.Quantity
			live[j] = append(live[j], h)
		}
	}
	for _, h := range closed {
		if j, ok := at[holdBucket(sku, h)]; ok {
			gone[j] = append(gone[j], h)
		}
	}
	free := initial - survivors
	for j := range lost {
		free += in[j] - out[j] - ordered[j]
	}
	free = max(free, 0) // less: the lost buckets' orders exceed their units, a drift the reconciler reports
	var extra []string
	if soldOut {
		extra = []string{"soldout", "1"}
	}
	var rebuilt []int
	n := int64(len(lost))
	for j, b := range lost {
		rem := free / n
		if int64(j) < free%n {
			rem++
		}
		xfer := append([]string{"in", strconv.FormatInt(in[j], 10), "out", strconv.FormatInt(out[j], 10)}, pairs[j]...)
		k := sale.KeysIn(a.ID, sku.ID, b)
		code, err := rebuildScript.Exec(ctx, s.bucketClient(a.ID, sku, b),
			[]string{k.Meta, k.Stock, k.Users, k.Sold, k.Claim, k.Closed, k.Qty, k.Pending, sale.TransfersKey(a.ID, sku.ID, b)},
			rebuildArgs(a, sku, rem+ordered[j]-in[j]+out[j], ordered[j], extra, xfer, live[j], gone[j])).ToString()
		if err != nil {
			return rebuilt, fmt.Errorf("rebuild activity %d sku %d bucket %d: %w", a.ID, sku.ID, b, err)
		}
		if code == "REBUILT" {
			rebuilt = append(rebuilt, b)
		}
	}
	// The transfers toward the rebuilt buckets land now (once per id: a
	// rebuilt bucket has no record of any credit).
	if _, err := s.FinishTransfers(ctx, a.ID, sku); err != nil {
		return rebuilt, err
	}
	if len(rebuilt) > 0 && free > 0 {
		s.publish(ctx, sale.Event{Kind: sale.EventAvailable, Activity: a.ID, SKU: sku.ID})
	}
	return rebuilt, nil
}

// holdBucket is the bucket an order's record belongs to: the one its
// ticket number names, else (a number that names none) its buyer's.
func holdBucket(sku *sale.SKU, h Hold) int {
	if b := sale.TicketBucket(h.RequestNo); b >= 0 {
		return b
	}
	return sku.BucketOf(h.UserID)
}

// bucketStates reads every bucket of sku (bucket_state.lua), each in one
// atomic step, with its transfers with the buckets lost.
func (s *Stock) bucketStates(ctx context.Context, activity int64, sku *sale.SKU, lost []int) ([]bucketState, error) {
	args := make([]string, len(lost))
	for j, b := range lost {
		args[j] = strconv.Itoa(b)
	}
	out := make([]bucketState, sku.Buckets)
	for b := range out {
		v, err := bucketStateScript.Exec(ctx, s.bucketClient(activity, sku, b),
			[]string{sale.KeysIn(activity, sku.ID, b).Meta, sale.TransfersKey(activity, sku.ID, b)}, args).AsIntSlice()
		if err != nil {
			return nil, fmt.Errorf("bucket %d of sku %d: %w", b, sku.ID, err)
		}
		if len(v) != 7+3*len(lost) {
			return nil, fmt.Errorf("bucket %d of sku %d: %d values, want %d", b, sku.ID, len(v), 7+3*len(lost))
		}
		st := bucketState{present: v[0] == 1, initial: v[1], soldOut: v[2] == 1, in: v[3], out: v[4], sumFrom: v[5], sumTo: v[6]}
		for j := range lost {
			st.to = append(st.to, v[7+3*j])
			st.from = append(st.from, v[8+3*j])
			st.flight = append(st.flight, v[9+3*j])
		}
		out[b] = st
	}
	return out, nil
}
