package stock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"seckill/internal/shard"
	"seckill/lua"
	"seckill/sale"
)

// A SKU split into buckets (sale.SKU.Buckets > 1) is that many sub-ledgers,
// each with the SKU's key names under its own hash tag (sale.KeysIn) and so
// the same scripts: a buyer's record lives in bucket sale.SKU.BucketOf(user)
// and its ticket number names the bucket (sale.ParseTicket), so claims,
// releases and results go to it without a lookup. A bucket that runs dry
// while others hold stock pulls units from the fullest by a transfer
// (Transfer); the SKU is sold out only when every bucket is empty and no
// transfer is in flight.

var (
	transferDebitScript  = rueidis.NewLuaScript(lua.TransferDebit)
	transferCreditScript = rueidis.NewLuaScript(lua.TransferCredit)
	bucketReadScript     = rueidis.NewLuaScript(lua.BucketRead)
	transferTrimScript   = rueidis.NewLuaScript(lua.TransferTrim)
)

// PlaceIn is the index of the shard that holds bucket b of k (Place for
// sale.NoBucket or a SKU not split): bucket b of a hot SKU is on hot shard
// k.HotShards[b mod len] when it pins them, else b shards after the SKU's
// own placement, so the buckets spread over the hot shards evenly; the
// buckets of a SKU that is not hot live on redis.default.
func (s *Stock) PlaceIn(activity int64, k *sale.SKU, b int) int {
	if b < 0 || !k.Split() {
		return s.Place(activity, k)
	}
	n := s.shards.HotCount()
	idx := -1
	switch {
	case len(k.HotShards) > 0:
		idx = k.HotShards[b%len(k.HotShards)]
		if idx >= n {
			return idx // a shard this process lacks: its client refuses
		}
	case k.Hot && n > 0:
		idx = (shard.HotIndex(activity, k.ID, n) + b) % n
	}
	if idx >= 0 && !s.shards.Apart(idx) {
		return -1
	}
	return idx
}

// bucketClient is the client of bucket b of k.
func (s *Stock) bucketClient(activity int64, k *sale.SKU, b int) rueidis.Client {
	return s.shards.Client(s.PlaceIn(activity, k, b))
}

// BucketClient is the client of the shard that holds bucket b of SKU
// (activity, sku) — Client for sale.NoBucket — routed by the catalog; a
// SKU it does not know is on redis.default. The results store routes a
// ticket with it (its number names the bucket).
func (s *Stock) BucketClient(activity, sku int64, b int) rueidis.Client {
	return s.shards.Client(s.shardIn(activity, sku, b))
}

// shardIn is PlaceIn for SKU (activity, sku) routed by the catalog: -1
// (redis.default) for a SKU it does not know.
func (s *Stock) shardIn(activity, sku int64, b int) int {
	_, k, ok := s.cat.Lookup(activity, sku)
	if !ok {
		return -1
	}
	return s.PlaceIn(activity, k, b)
}

// bucketsOf lists the buckets of SKU (activity, sku) as the catalog knows
// it ([sale.NoBucket] for one it does not know).
func (s *Stock) bucketsOf(activity, sku int64) []int {
	if _, k, ok := s.cat.Lookup(activity, sku); ok {
		return k.BucketIndexes()
	}
	return []int{sale.NoBucket}
}

// bucketRemaining reads the remaining stock of every bucket of k, and the
// units debited by transfers not yet credited (in flight). Each bucket's
// remaining and transfer totals are read in one atomic step and in flight
// is the buckets' units ever debited minus those ever credited, so the
// sum counts every unit once whatever transfers run between two buckets'
// reads: a transfer credited after its destination was read and settled
// before its source was read is still in flight by the totals (its f:
// entry is gone), never a unit missed — which would be a false sold-out.
func (s *Stock) bucketRemaining(ctx context.Context, activity int64, k *sale.SKU) (rem []int64, inFlight int64, err error) {
	rem, inFlight, lost, err := s.bucketSums(ctx, activity, k)
	if err == nil && lost >= 0 {
		// Preheat writes every bucket's stock key: Redis lost it.
		return nil, 0, fmt.Errorf("%w: bucket %d of sku %d", ErrStateLost, lost, k.ID)
	}
	return rem, inFlight, err
}

// bucketSums is bucketRemaining that reads past a bucket Redis lost: its
// rem is -1 and lost names the first such bucket (-1: none).
func (s *Stock) bucketSums(ctx context.Context, activity int64, k *sale.SKU) (rem []int64, inFlight int64, lost int, err error) {
	rem, lost = make([]int64, k.BucketCount()), -1
	for b := range rem {
		c := s.bucketClient(activity, k, b)
		v, err := bucketReadScript.Exec(ctx, c,
			[]string{sale.KeysIn(activity, k.ID, b).Stock, sale.TransfersKey(activity, k.ID, b)}, nil).AsIntSlice()
		if err != nil {
			return nil, 0, -1, fmt.Errorf("bucket %d of sku %d: %w", b, k.ID, err)
		}
		if len(v) != 4 {
			return nil, 0, -1, fmt.Errorf("bucket %d of sku %d: %d values, want 4", b, k.ID, len(v))
		}
		if v[0] == 0 {
			rem[b] = -1
			if lost < 0 {
				lost = b
			}
		} else {
			rem[b] = v[1]
		}
		inFlight += v[2] - v[3]
		if afterBucketRead != nil {
			afterBucketRead(b)
		}
	}
	return rem, max(inFlight, 0), lost, nil
}

// afterBucketRead, when set (by a test), runs after bucketRemaining read
// bucket b: where a transfer lands between two reads.
var afterBucketRead func(b int)

// flightUnits reads an in-flight entry "<dst>:<units>"; 0 when unreadable.
func flightUnits(v string) int64 {
	_, u, _ := strings.Cut(v, ":")
	n, _ := strconv.ParseInt(u, 10, 64)
	return n
}

// newTransferID is a fresh transfer id: 16 random bytes in hex.
func newTransferID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b[:])
}

// Transfer moves up to want units of SKU k from bucket src to bucket dst
// and answers the units moved. The debit is recorded under a fresh id on
// src; the credit is applied once per id on dst; then src forgets the
// transfer. A lost reply is retried with the same id, and a transfer
// interrupted after its debit (a crash, a timeout) is finished by
// FinishTransfers: no unit is ever created or lost.
func (s *Stock) Transfer(ctx context.Context, activity int64, k *sale.SKU, src, dst int, want int64) (int64, error) {
	if !k.Split() || src == dst || src < 0 || dst < 0 || src >= k.Buckets || dst >= k.Buckets || want < 1 {
		return 0, fmt.Errorf("transfer sku %d: buckets %d → %d of %d, %d units: not a transfer", k.ID, src, dst, k.BucketCount(), want)
	}
	id := newTransferID()
	sc := s.bucketClient(activity, k, src)
	skeys := []string{sale.KeysIn(activity, k.ID, src).Stock, sale.TransfersKey(activity, k.ID, src)}
	args := []string{id, strconv.FormatInt(want, 10), strconv.Itoa(dst)}
	var n int64
	var err error
	for try := 0; try < 2; try++ { // one retry with the same id: the debit happens once
		if n, err = transferDebitScript.Exec(ctx, sc, skeys, args).AsInt64(); err == nil {
			break
		}
	}
	if err != nil {
		return 0, fmt.Errorf("transfer sku %d: debit bucket %d: %w", k.ID, src, err)
	}
	if n == 0 {
		return 0, nil
	}
	if err := s.credit(ctx, activity, k, src, dst, id, n); err != nil {
		return 0, err
	}
	return n, nil
}

// credit applies transfer id's n units to bucket dst (once per id), then
// removes the transfer from src's in-flight entries.
func (s *Stock) credit(ctx context.Context, activity int64, k *sale.SKU, src, dst int, id string, n int64) error {
	dc := s.bucketClient(activity, k, dst)
	dk := sale.KeysIn(activity, k.ID, dst)
	dkeys := []string{dk.Stock, sale.TransfersKey(activity, k.ID, dst), dk.Meta}
	if err := transferCreditScript.Exec(ctx, dc, dkeys, []string{id, strconv.FormatInt(n, 10), strconv.Itoa(src)}).Error(); err != nil {
		return fmt.Errorf("transfer sku %d: credit bucket %d (%d units in flight, id %s): %w", k.ID, dst, n, id, err)
	}
	sc := s.bucketClient(activity, k, src)
	if err := sc.Do(ctx, sc.B().Hdel().Key(sale.TransfersKey(activity, k.ID, src)).Field("f:"+id).Build()).Error(); err != nil {
		return fmt.Errorf("transfer sku %d: settle %s on bucket %d: %w", k.ID, id, src, err)
	}
	return nil
}

// FinishTransfers credits every transfer of k whose debit was recorded and
// whose credit was not confirmed (a crash or a lost reply between the
// steps), and answers how many it finished. Crediting twice is harmless:
// the destination applies an id once. An entry it cannot finish (its
// destination lost, unreadable) is left in flight and reported; the
// others are finished.
func (s *Stock) FinishTransfers(ctx context.Context, activity int64, k *sale.SKU) (int, error) {
	if !k.Split() {
		return 0, nil
	}
	done := 0
	var errs []error // one entry or bucket that fails does not stop the others
	for src := 0; src < k.Buckets; src++ {
		c := s.bucketClient(activity, k, src)
		m, err := c.Do(ctx, c.B().Hgetall().Key(sale.TransfersKey(activity, k.ID, src)).Build()).AsStrMap()
		if err != nil && !rueidis.IsRedisNil(err) {
			errs = append(errs, fmt.Errorf("finish transfers of sku %d bucket %d: %w", k.ID, src, err))
			continue
		}
		for f, v := range m {
			id, ok := strings.CutPrefix(f, "f:")
			if !ok {
				continue
			}
			d, u, _ := strings.Cut(v, ":")
			dst, err1 := strconv.Atoi(d)
			n, err2 := strconv.ParseInt(u, 10, 64)
			if err1 != nil || err2 != nil || dst < 0 || dst >= k.Buckets || n < 1 {
				errs = append(errs, fmt.Errorf("finish transfers of sku %d bucket %d: unreadable entry %s=%q", k.ID, src, f, v))
				continue
			}
			if err := s.credit(ctx, activity, k, src, dst, id, n); err != nil {
				errs = append(errs, err)
				continue
			}
			done++
		}
	}
	return done, errors.Join(errs...)
}

// TransferKeep is how long a finished transfer's per-id entries ("d:<id>",
// "c:<id>") are kept before TrimTransfers drops them: far longer than a
// transfer's own retries and a FinishTransfers pass that read its
// in-flight entry take (each bounded by the Redis timeouts, seconds), the
// only readers of those entries.
const TransferKeep = 10 * time.Minute

// TrimTransfers drops, on every bucket of k, the per-id entries of
// transfers finished more than keep ago (transfer_trim.lua), so a bucket's
// transfer record holds the transfers of the last keep and those in
// flight, not every transfer of the sale; its totals stay. It answers the
// entries dropped. The reconciler runs it every pass.
//
// A credit's "c:<id>" entry is what makes FinishTransfers' repeated
// credit a no-op, and FinishTransfers repeats it for as long as the
// source holds the transfer's "f:<id>" (the settle after the credit
// failed, or a failover lost it): such an entry stays however old, and
// every "c:" entry stays while some bucket's record cannot be read.
func (s *Stock) TrimTransfers(ctx context.Context, activity int64, k *sale.SKU, keep time.Duration) (int64, error) {
	if !k.Split() {
		return 0, nil
	}
	args := []string{strconv.FormatInt(max(keep.Milliseconds(), 1), 10), "0"}
	var errs []error
	for b := 0; b < k.Buckets; b++ {
		c := s.bucketClient(activity, k, b)
		fs, err := c.Do(ctx, c.B().Hkeys().Key(sale.TransfersKey(activity, k.ID, b)).Build()).AsStrSlice()
		if err != nil && !rueidis.IsRedisNil(err) {
			errs = append(errs, fmt.Errorf("trim transfers of sku %d: read bucket %d: %w", k.ID, b, err))
			args[1] = "1"
			continue
		}
		for _, f := range fs {
			if id, ok := strings.CutPrefix(f, "f:"); ok {
				args = append(args, id)
			}
		}
	}
	var n int64
	for b := 0; b < k.Buckets; b++ {
		m, err := transferTrimScript.Exec(ctx, s.bucketClient(activity, k, b),
			[]string{sale.TransfersKey(activity, k.ID, b)}, args).AsInt64()
		if err != nil {
			errs = append(errs, fmt.Errorf("trim transfers of sku %d bucket %d: %w", k.ID, b, err))
			continue
		}
		n += m
	}
	return n, errors.Join(errs...)
}

// errNoStockElsewhere: no bucket of the SKU holds stock (nor a transfer).
var errNoStockElsewhere = errors.New("every bucket is empty")

// rebalance pulls units into bucket b of k from the fullest other bucket:
// half of what that one holds, at least need. It answers the units moved
// and errNoStockElsewhere when every bucket (b included) is empty with
// nothing in flight — the SKU is sold out.
//
// A transfer FinishTransfers cannot finish (its destination lost) and a
// bucket Redis lost do not stop it: their units are not counted as empty
// (never errNoStockElsewhere while a bucket is lost), and the fullest
// bucket that can be read still gives.
func (s *Stock) rebalance(ctx context.Context, activity int64, k *sale.SKU, b int, need int64) (int64, error) {
	_, ferr := s.FinishTransfers(ctx, activity, k) // what it cannot finish stays in flight
	rem, inFlight, lost, err := s.bucketSums(ctx, activity, k)
	if err != nil {
		return 0, errors.Join(err, ferr)
	}
	if lost >= 0 {
		inFlight = max(inFlight, 1) // units unknown: not sold out
	}
	full, total := -1, int64(0)
	for i, r := range rem {
		total += max(r, 0)
		if i != b && r > 0 && (full < 0 || r > rem[full]) {
			full = i
		}
	}
	if total+inFlight == 0 {
		return 0, errNoStockElsewhere
	}
	if full < 0 {
		return 0, nil
	}
	return s.Transfer(ctx, activity, k, full, b, max(need, (rem[full]+1)/2))
}

// markedIn reports whether bucket b of k carries the on-call sold-out mark;
// false when it cannot be read (the buyer is then answered as if unmarked:
// REBALANCING while units remain, never a guessed sale).
func (s *Stock) markedIn(ctx context.Context, activity int64, k *sale.SKU, b int) bool {
	c := s.bucketClient(activity, k, b)
	v, err := c.Do(ctx, c.B().Hget().Key(sale.KeysIn(activity, k.ID, b).Meta).Field("soldout").Build()).ToString()
	return err == nil && v == "1"
}

// rebalanceRetryAfter is the Retry-After of a buyer whose bucket was
// empty while others held stock: a transfer serves it shortly.
const rebalanceRetryAfter = time.Second

// splitResults turns the answers of one occupy call on bucket b of a split
// SKU into the SKU's: a buyer the bucket could not serve (SOLD_OUT) is
// served after a transfer from the fullest bucket (one retry, its window
// attempt already counted), else answered REBALANCING (a 429 with a short
// Retry-After) while any bucket holds stock, SOLD_OUT only when none does,
// the buyer asks more than every bucket holds together, or on-call marked
// the SKU sold out (no transfer then).
// Remaining is scaled to an estimate of the SKU's (the bucket's × Buckets)
// and is 0 only when every bucket is empty. It reports whether the SKU is
// sold out.
func (s *Stock) splitResults(ctx context.Context, a *sale.Activity, sku *sale.SKU, b int, x Extras, buyers []Buyer, res []OccupyResult) bool {
	var need int64
	var short []int
	empty := false
	for i := range res {
		switch {
		case res[i].Code == CodeSoldOut:
			need += buyers[i].Quantity
			short = append(short, i)
		case res[i].Code == CodeOK && res[i].Remaining == 0:
			empty = true
		}
	}
	if len(short) > 0 && s.markedIn(ctx, a.ID, sku, b) {
		// On-call marked the SKU sold out (every bucket carries the
		// mark): SOLD_OUT as it stands, no transfer.
		return true
	}
	if len(short) > 0 {
		moved, err := s.rebalance(ctx, a.ID, sku, b, need)
		if err == nil && moved > 0 {
			retry := make([]Buyer, len(short))
			for j, i := range short {
				retry[j] = buyers[i]
			}
			// The window counted these attempts in the first call (as
			// SOLD_OUT there, stored). One that takes a ticket here keeps
			// that count, and its release counts it once more: twice for
			// one attempt, stricter than the rule, never looser.
			rx := Extras{}
			k := sale.KeysIn(a.ID, sku.ID, b)
			now := time.Now()
			again, rerr := s.occupyBatchArgs(ctx, a, sku, b, rx, false, appendBatchKeys(nil, &k, rx, now), retry,
				appendBatchArgs(nil, a.ID, sku.ID, rx, now, retry), nil)
			if rerr == nil {
				for j, i := range short {
					res[i] = again[j]
				}
			}
		}
		if errors.Is(err, errNoStockElsewhere) {
			for _, i := range short {
				res[i].Remaining = 0
			}
			return true
		}
	}
	// What every bucket holds, read only when this one ran dry.
	total := int64(-1)
	for i := range res {
		if res[i].Code == CodeSoldOut || res[i].Code == CodeOK && res[i].Remaining == 0 {
			empty = true
		}
	}
	if empty {
		if rem, inFlight, err := s.bucketRemaining(ctx, a.ID, sku); err == nil {
			total = inFlight
			for _, r := range rem {
				total += max(r, 0)
			}
		}
	}
	for i := range res {
		r := &res[i]
		switch {
		case r.Code == CodeSoldOut && total > 0 && total < buyers[i].Quantity:
			// More than the whole SKU holds: no transfer can serve it.
			r.Remaining = total
		case r.Code == CodeSoldOut && total != 0:
			// Units remain elsewhere (or the buckets could not be read):
			// never a sold-out for this buyer.
			r.Code, r.Remaining, r.RetryAfter = CodeRebalancing, max(total, -1), rebalanceRetryAfter
		case r.Remaining == 0 && total != 0:
			r.Remaining = max(total, -1)
		case r.Remaining > 0:
			r.Remaining *= int64(sku.Buckets)
		}
	}
	return total == 0
}
