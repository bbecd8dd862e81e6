package stock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"seckill/lua"
	"seckill/sale"
)

// maxBatch bounds the buyers of one batch script call (engine.batch.max_size)
// and the tickets of one claim_batch.lua call: 3 ARGV strings and 2 keys per
// buyer stay far below Lua's stack limit for unpack.
const maxBatch = 1024

// CheckBatchSize says whether n buyers fit one occupy script call: nil
// for 1..1024 (engine.batch.max_size is checked with it).
func CheckBatchSize(n int) error {
	if n < 1 || n > maxBatch {
		return fmt.Errorf("a batch of %d buyers: must be 1..%d", n, maxBatch)
	}
	return nil
}

var occupyBatchScript = rueidis.NewLuaScript(lua.OccupyBatch)

// Buyer is one buyer of a batched occupy.
type Buyer struct {
	UserID    int64
	RequestNo string
	Quantity  int64
}

// Extras is what the occupy script does for each buyer beside the stock
// rules, so that an accepted buyer costs Redis one call (DESIGN §5): it
// counts every buyer's attempt in the user × SKU window but the one that
// takes a ticket, which the release that gives the ticket back counts
// (Stock.SetWindow). The zero value counts nothing.
type Extras struct {
	// WindowLimit attempts per user and SKU are allowed per WindowPeriod
	// (edge.rate.user_sku_limit and user_sku_window); past it the buyer is
	// RATE_LIMITED. 0 turns the window off: no counter is touched. The
	// windows are fixed, aligned on the unix epoch by the caller's clock
	// (one hash per SKU and window, sale.RateKey), so a buyer may spend
	// one window's attempts at its end and the next one's at its start.
	WindowLimit  int
	WindowPeriod time.Duration
	// Queued, when set, is called once the occupy holds its place in its
	// SKU's group-commit queue (under the queue's lock: it must not block),
	// so a caller that starts occupies one after another can keep their
	// order: the next one starts after the previous one is queued. Batcher
	// only; a lone script call never calls it.
	Queued func()
}

func (x *Extras) window() bool { return x.WindowLimit > 0 && x.WindowPeriod >= time.Millisecond }

// bucket is the number of the window that holds now: unix ms / the
// window's ms.
func (x *Extras) bucket(now time.Time) int64 { return now.UnixMilli() / x.WindowPeriod.Milliseconds() }

// end is the unix ms at which the window that holds now ends.
func (x *Extras) end(now time.Time) int64 { return (x.bucket(now) + 1) * x.WindowPeriod.Milliseconds() }

// OccupyBatch runs the occupy script (occupy_batch.lua) for buyers of one
// SKU, in order: each buyer's result is the one Occupy would have given it
// called once per buyer in that order. The results are appended to out. An
// error is a Redis failure and holds for every buyer. A remaining stock of
// 0 publishes the sold-out event (once). The buyers of a SKU split into
// buckets are judged each in its own bucket (sale.SKU.BucketOf), one script
// call per bucket.
func (s *Stock) OccupyBatch(ctx context.Context, a *sale.Activity, sku *sale.SKU, x Extras, buyers []Buyer, out []OccupyResult) ([]OccupyResult, error) {
	if !sku.Split() {
		return s.occupyBucket(ctx, a, sku, sale.NoBucket, x, buyers, out)
	}
	base := len(out)
	out = append(out, make([]OccupyResult, len(buyers))...)
	var in []Buyer
	var idx []int
	var res []OccupyResult
	for b := 0; b < sku.Buckets; b++ {
		in, idx = in[:0], idx[:0]
		for i := range buyers {
			if sku.BucketOf(buyers[i].UserID) == b {
				in, idx = append(in, buyers[i]), append(idx, i)
			}
		}
		if len(in) == 0 {
			continue
		}
		var err error
		if res, err = s.occupyBucket(ctx, a, sku, b, x, in, res[:0]); err != nil {
			return out[:base], err
		}
		for j, i := range idx {
			out[base+i] = res[j]
		}
	}
	return out, nil
}

// occupyBucket is one occupy script call for buyers of bucket b of sku (all
// of them, for sale.NoBucket).
func (s *Stock) occupyBucket(ctx context.Context, a *sale.Activity, sku *sale.SKU, b int, x Extras, buyers []Buyer, out []OccupyResult) ([]OccupyResult, error) {
	k := sale.KeysIn(a.ID, sku.ID, b)
	now := time.Now()
	keys := appendBatchKeys(make([]string, 0, 9), &k, x, now)
	args := appendBatchArgs(make([]string, 0, 5+3*len(buyers)), a.ID, sku.ID, x, now, buyers)
	return s.occupyBatchArgs(ctx, a, sku, b, x, b >= 0, keys, buyers, args, out)
}

// appendBatchKeys appends the KEYS of one occupy script call at now to
// keys: the SKU's eight (k) and, where x's window is on, the hash of the
// window that holds now. They do not depend on the buyers: a caller that
// sends batch after batch of one SKU rebuilds them only when the window
// turns.
func appendBatchKeys(keys []string, k *sale.SKUKeys, x Extras, now time.Time) []string {
	keys = append(keys, k.Meta, k.Stock, k.Users, k.Sold, k.Closed, k.Qty, k.Pending)
	if x.window() {
		var buf [20]byte
		keys = append(keys, k.Rate+string(strconv.AppendInt(buf[:0], x.bucket(now), 10)))
	}
	return keys
}

// appendBatchArgs appends the ARGV of one occupy script call at now to
// args: the SKU's ids, x's settings (the window's end where it is on),
// then each buyer's triple.
func appendBatchArgs(args []string, activity, sku int64, x Extras, now time.Time, buyers []Buyer) []string {
	limit, end := "0", "0"
	if x.window() {
		limit, end = strconv.Itoa(x.WindowLimit), strconv.FormatInt(x.end(now), 10)
	}
	args = append(args, strconv.FormatInt(activity, 10), strconv.FormatInt(sku, 10), limit, end)
	for _, b := range buyers {
		args = append(args, strconv.FormatInt(b.UserID, 10), b.RequestNo, strconv.FormatInt(b.Quantity, 10))
	}
	return args
}

// occupyBatchArgs is occupyBucket with the call's KEYS (appendBatchKeys) and
// ARGV (appendBatchArgs) built by the caller, so one that sends batch after
// batch of one SKU (the group commit) reuses their buffers. split turns a
// bucket's answers into the SKU's (splitResults); a retry after a transfer
// passes false (its answers are the bucket's, for the first call's
// splitResults to turn).
func (s *Stock) occupyBatchArgs(ctx context.Context, a *sale.Activity, sku *sale.SKU, b int, x Extras, split bool, keys []string, buyers []Buyer, args []string, out []OccupyResult) ([]OccupyResult, error) {
	if len(buyers) == 0 {
		return out, nil
	}
	vals, acked, err := s.occupyExec(ctx, s.bucketClient(a.ID, sku, b), keys, args)
	if err != nil {
		// With wait_replicas, the script may have run and its WAIT failed:
		// the buyers are busy either way, and what it took the sweeper
		// gives back (as after a timeout).
		return out, fmt.Errorf("occupy sku %d (batch of %d): %w", sku.ID, len(buyers), err)
	}
	if len(vals) != 3*len(buyers) {
		return out, fmt.Errorf("occupy sku %d: batch script answered %d values for %d buyers", sku.ID, len(vals), len(buyers))
	}
	soldOut := false
	for i := range buyers {
		var r OccupyResult
		if r.Code, err = vals[3*i].ToString(); err != nil {
			return out, fmt.Errorf("occupy sku %d: %w", sku.ID, err)
		}
		if r.Remaining, err = vals[3*i+1].AsInt64(); err != nil {
			return out, fmt.Errorf("occupy sku %d: %w", sku.ID, err)
		}
		switch r.Code {
		case CodeOK:
			r.Holder = buyers[i].RequestNo // the script echoes it; skip a copy
		case CodeDuplicate:
			r.Holder, _ = vals[3*i+2].ToString()
		case CodeRateLimited:
			ms, _ := vals[3*i+2].AsInt64()
			r.RetryAfter = time.Duration(ms) * time.Millisecond
		}
		if r.Remaining == 0 && (r.Code == CodeOK || r.Code == CodeSoldOut) {
			soldOut = true
		}
		out = append(out, r)
	}
	if w := s.shards.Wait(); acked >= 0 && acked < int64(w.Replicas) {
		res := out[len(out)-len(buyers):]
		err := fmt.Errorf("%w: occupy sku %d (batch of %d): %d of %d replicas within %v",
			ErrNotReplicated, sku.ID, len(buyers), acked, w.Replicas, w.Timeout)
		if gerr := s.giveBack(ctx, a, sku, buyers, res, x.window()); gerr != nil {
			err = fmt.Errorf("%w; %w", err, gerr)
		}
		return out[:len(out)-len(buyers)], err
	}
	if b >= 0 {
		// A bucket: its emptiness is not the SKU's (splitResults; a retry
		// leaves it to the first call's).
		soldOut = split && s.splitResults(ctx, a, sku, b, x, buyers, out[len(out)-len(buyers):])
	}
	if soldOut {
		s.publish(ctx, sale.Event{Kind: sale.EventSoldOut, Activity: a.ID, SKU: sku.ID})
	}
	return out, nil
}
