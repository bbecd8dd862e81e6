// Package stock is the Redis stock ledger: the one part that changes or reads
// per-SKU stock state. It occupies (one buyer, or a batch), releases, claims
// and restocks with the Lua scripts of package lua on the shard that owns
// each SKU, keeps the on-call marks, preheats and rebuilds activities, reads
// the ledger for reconciliation and publishes the sold-out / available
// events the edges listen to. outcome.go is the one table of occupy
// outcomes (script code, sentinel, metric label, sidecar wire code).
package stock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"seckill/catalog"
	"seckill/internal/shard"
	"seckill/sale"
)

// Stock runs the stock scripts (occupy, release, claim) on the shard that
// owns each SKU, preheats activities and publishes stock events. It is the
// one place that changes stock in Redis; the engine, the consumer and the
// admin tools all go through it. Safe for concurrent use.
type Stock struct {
	shards  *shard.Set
	cat     *catalog.Catalog
	onEvent func(sale.Event)
	ordered OrderedFunc
	now     func() time.Time
	// window is the user × SKU window a release counts a given-back
	// ticket's attempt in (SetWindow); nil or off: none.
	window atomic.Pointer[Extras]
}

// Option is a test seam or wiring hook.
type Option func(*Stock)

// WithEventHook calls fn for every event Stock publishes, before publishing
// (the in-process edge uses it to update its flags without a round trip).
func WithEventHook(fn func(sale.Event)) Option { return func(s *Stock) { s.onEvent = fn } }

// WithWindow is SetWindow at construction.
func WithWindow(limit int, period time.Duration) Option {
	return func(s *Stock) { s.SetWindow(limit, period) }
}

// SetWindow sets the user × SKU window (edge.rate.user_sku_limit per
// user_sku_window) that every release counts the attempt of a ticket it
// gives back in: the occupy script does not store the attempt that takes a
// ticket (the buyer's record answers each later one DUPLICATE), so a
// ticket released — by the engine after a failed produce, the consumer,
// the orphan sweeper, an unpaid close — is counted then, once, in the
// window that holds the release. Limit 0 turns it off. Safe for concurrent
// use; the engine sets it from its own window (engine.Local.SetWindow).
func (s *Stock) SetWindow(limit int, period time.Duration) {
	s.window.Store(&Extras{WindowLimit: limit, WindowPeriod: period})
}

// New returns a Stock over shards; cat routes SKUs (hot or not).
func New(shards *shard.Set, cat *catalog.Catalog, opts ...Option) *Stock {
	s := &Stock{
		shards: shards,
		cat:    cat,
		now:    time.Now,
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Catalog returns the catalog Stock routes with.
func (s *Stock) Catalog() *catalog.Catalog { return s.cat }

// Shards returns the Redis deployments.
func (s *Stock) Shards() *shard.Set { return s.shards }

// Occupy codes returned by the occupy script (occupy_batch.lua);
// outcome.go maps each to its sentinel.
const (
	CodeOK        = "OK"
	CodeNotOpen   = "NOT_OPEN"
	CodeEnded     = "ENDED"
	CodeSoldOut   = "SOLD_OUT"
	CodeDuplicate = "DUPLICATE"
	CodeOverLimit = "OVER_LIMIT"
	// CodeMissing: the SKU has no meta hash. Redis lost it (a restart
	// without persistence, a FLUSHALL) and the watcher has not rebuilt it
	// from the database yet: the engine answers busy, never not-open.
	CodeMissing = "MISSING"
	// CodeRateLimited: the buyer's attempts on the SKU are over the user ×
	// SKU window (Extras.WindowLimit); counted before any other rule.
	CodeRateLimited = "RATE_LIMITED"
	// CodeRebalancing: the buyer's bucket is empty while other buckets
	// hold stock (no script answers it: the ledger does, after trying a
	// transfer).
	CodeRebalancing = "REBALANCING"
)

// OccupyResult is the occupy script's answer.
type OccupyResult struct {
	Code      string
	Remaining int64  // -1 where the script did not read stock
	Holder    string // the requestNo holding the user's record (OK, DUPLICATE)
	// RetryAfter is how long until the user × SKU window lets the buyer try
	// again (RATE_LIMITED only).
	RetryAfter time.Duration
}

// Err maps the script's code to the package's sentinel (the outcome
// table); nil for OK.
func (r OccupyResult) Err() error {
	if o, ok := OutcomeOfCode(r.Code); ok {
		return o.Err()
	}
	return fmt.Errorf("%w: occupy script answered %q", ErrBusy, r.Code)
}

// Client is the client of the shard that holds SKU (activity, sku) — every
// key of the SKU, its tickets' results included, lives there: the one
// routing function. A hot SKU lives on hot shard sku.hotShard, else
// on the placement rule's hot shard (shard.Set.Place); the others, and a
// SKU the catalog does not know, on redis.default. A SKU that names a
// hot shard this process lacks gets a client that refuses every command
// (shard.ErrNoShard): it fails closed, it is never served elsewhere.
func (s *Stock) Client(activity, sku int64) rueidis.Client {
	return s.shards.Client(s.Shard(activity, sku))
}

// PingShard asks shard idx (Place's index; -1: redis.default) for a PING:
// whether it answers at all, for a caller that found a read of it failing.
func (s *Stock) PingShard(ctx context.Context, idx int) error {
	c := s.shards.Client(idx)
	return c.Do(ctx, c.B().Ping().Build()).Error()
}

// Shard is the index (shard.Set.Place) of the shard that holds SKU
// (activity, sku): -1 for redis.default. ShardName names it.
func (s *Stock) Shard(activity, sku int64) int {
	_, k, ok := s.cat.Lookup(activity, sku)
	if !ok {
		return -1
	}
	return s.Place(activity, k)
}

// ShardName names the shard that holds SKU (activity, sku): "default",
// "hot0", "hot1", … ("missing" for a hot shard not configured).
func (s *Stock) ShardName(activity, sku int64) string {
	return s.shards.Name(s.Shard(activity, sku))
}

// Place is the index of the shard that holds k's keys, for a caller that
// holds the SKU already (no catalog lookup): -1 for redis.default — a hot
// shard that is the default deployment too, so callers grouping by shard
// send one pipeline to it.
func (s *Stock) Place(activity int64, k *sale.SKU) int {
	idx, _ := s.shards.Place(activity, k.ID, k.Hot, k.Shard())
	if idx >= 0 && idx < s.shards.HotCount() && !s.shards.Apart(idx) {
		return -1
	}
	return idx
}

// skuClient is the client of k's shard, for callers that hold the SKU
// (the catalog's or one being preheated or rebuilt).
func (s *Stock) skuClient(activity int64, k *sale.SKU) rueidis.Client {
	return s.shards.Client(s.Place(activity, k))
}

// Occupy takes stock for one buyer with the zero Extras (results kept for
// results.DefaultTTL, no window): OccupyWith.
func (s *Stock) Occupy(ctx context.Context, a *sale.Activity, sku *sale.SKU, user int64, requestNo string, q int64) (OccupyResult, error) {
	return s.OccupyWith(ctx, a, sku, Extras{}, user, requestNo, q)
}

// OccupyWith takes stock for one buyer: the occupy script (occupy_batch.lua)
// with a batch of one, so one buyer is judged by exactly the rules a
// group-commit batch applies, and x says what else the call does (the
// QUEUING result, the user × SKU window). An error is a Redis failure;
// business outcomes are in the result's Code. A remaining stock of 0
// publishes the sold-out event.
func (s *Stock) OccupyWith(ctx context.Context, a *sale.Activity, sku *sale.SKU, x Extras, user int64, requestNo string, q int64) (OccupyResult, error) {
	var out [1]OccupyResult
	res, err := s.OccupyBatch(ctx, a, sku, x, []Buyer{{UserID: user, RequestNo: requestNo, Quantity: q}}, out[:0])
	if err != nil {
		return OccupyResult{}, err
	}
	return res[0], nil
}

// Claim marks m's ticket as becoming an order: ClaimBatch with one ticket
// (claim_batch.lua). false means the record no longer names the ticket (it
// was released): no order may be made for it.
func (s *Stock) Claim(ctx context.Context, m *sale.Message) (bool, error) {
	held, err := s.ClaimBatch(ctx, []*sale.Message{m})
	if err != nil {
		return false, err
	}
	return held[0], nil
}

// Counts is one SKU's stock as Redis holds it.
type Counts struct {
	Initial   int64 // from meta
	Remaining int64 // stock key
	Sold      int64 // occupied or ordered
	Holders   int64 // user records (live occupancies + orders)
	Claimed   int64 // records claimed for an order
	Pending   int64 // records not claimed: Holders − Claimed
	// A SKU split into buckets: units debited by transfers not yet
	// credited, and (per bucket) the units transfers ever credited to it
	// and debited from it: Initial + In − Out = Remaining + Sold holds per
	// bucket, Initial = Remaining + Sold + InFlight for the SKU.
	InFlight, In, Out int64
}

// Counts reads one SKU's counters: the sum over its buckets for a SKU
// split into buckets (BucketCounts for each), Remaining without the units
// of transfers in flight (InFlight).
func (s *Stock) Counts(ctx context.Context, activity, sku int64) (Counts, error) {
	_, k, ok := s.cat.Lookup(activity, sku)
	if !ok || !k.Split() {
		return s.countsIn(ctx, s.Client(activity, sku), sale.KeysFor(activity, sku), sku)
	}
	per, err := s.BucketCounts(ctx, activity, k)
	if err != nil {
		return Counts{}, err
	}
	var out Counts
	for _, c := range per {
		out.Initial += c.Initial
		out.Remaining += c.Remaining
		out.Sold += c.Sold
		out.Holders += c.Holders
		out.Claimed += c.Claimed
		out.Pending += c.Pending
		out.InFlight += c.InFlight
	}
	return out, nil
}

// BucketCounts reads the counters of each bucket of k ([Counts] for a SKU
// not split); a bucket's InFlight is what transfers debited from it and
// have not credited yet, its Initial its share of the SKU's initial stock.
func (s *Stock) BucketCounts(ctx context.Context, activity int64, k *sale.SKU) ([]Counts, error) {
	var out []Counts
	for _, b := range k.BucketIndexes() {
		c, err := s.countsIn(ctx, s.bucketClient(activity, k, b), sale.KeysIn(activity, k.ID, b), k.ID)
		if err != nil {
			return nil, err
		}
		if b >= 0 {
			cl := s.bucketClient(activity, k, b)
			m, err := cl.Do(ctx, cl.B().Hgetall().Key(sale.TransfersKey(activity, k.ID, b)).Build()).AsStrMap()
			if err != nil && !rueidis.IsRedisNil(err) {
				return nil, fmt.Errorf("counts sku %d bucket %d: %w", k.ID, b, err)
			}
			for f, v := range m {
				switch {
				case strings.HasPrefix(f, "f:"):
					c.InFlight += flightUnits(v)
				case f == "in":
					c.In, _ = strconv.ParseInt(v, 10, 64)
				case f == "out":
					c.Out, _ = strconv.ParseInt(v, 10, 64)
				}
			}
		}
		out = append(out, c)
	}
	return out, nil
}

func (s *Stock) countsIn(ctx context.Context, c rueidis.Client, k sale.SKUKeys, sku int64) (Counts, error) {
	rs := c.DoMulti(ctx,
		c.B().Hget().Key(k.Meta).Field("initial").Build(),
		c.B().Get().Key(k.Stock).Build(),
		c.B().Get().Key(k.Sold).Build(),
		c.B().Hlen().Key(k.Users).Build(),
		c.B().Scard().Key(k.Claim).Build(),
	)
	var out Counts
	dst := []*int64{&out.Initial, &out.Remaining, &out.Sold, &out.Holders, &out.Claimed}
	for i, r := range rs {
		v, err := r.AsInt64()
		if err != nil && !rueidis.IsRedisNil(err) {
			return out, fmt.Errorf("counts sku %d: %w", sku, err)
		}
		*dst[i] = v
	}
	out.Pending = out.Holders - out.Claimed
	return out, nil
}

func (s *Stock) publish(ctx context.Context, e sale.Event) {
	if e.At == 0 {
		e.At = s.now().UnixNano()
	}
	if s.onEvent != nil {
		s.onEvent(e)
	}
	// Best effort: a missed event is covered by the edges' flag TTL and
	// catalog refresh, and must never fail a stock operation.
	c := s.shards.Default
	_ = c.Do(ctx, c.B().Publish().Channel(sale.EventsChannel).Message(e.String()).Build()).Error()
}

// Publish sends an event to every edge (and the local hook).
func (s *Stock) Publish(ctx context.Context, e sale.Event) { s.publish(ctx, e) }
