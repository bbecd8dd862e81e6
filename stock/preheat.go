package stock

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"seckill/sale"
)

// OrderedFunc reports how many units of (activity, sku) the database holds as
// orders (not closed). Preheat uses it when a SKU's stock key is missing, so
// that a Redis that came back empty is refilled with initial − ordered, never
// with the full initial stock.
type OrderedFunc func(ctx context.Context, activity, sku int64) (int64, error)

// WithOrdered sets the database view Preheat consults.
func WithOrdered(fn OrderedFunc) Option { return func(s *Stock) { s.ordered = fn } }

// Preheat writes activity a into Redis: the catalog entry on the default
// Redis and, on each SKU's shard, its meta (status, window, limit, price,
// initial, rebuy) and — only where absent — its stock and sold counters. An
// existing stock key is kept, so preheating a live activity again never
// resets a sale in progress (restock is a separate, explicit operation).
// It publishes an activity event.
func (s *Stock) Preheat(ctx context.Context, a sale.Activity) error {
	if err := a.Validate(); err != nil {
		return fmt.Errorf("preheat: %w", err)
	}
	for i := range a.SKUs {
		if err := s.preheatSKU(ctx, &a, &a.SKUs[i]); err != nil {
			return err
		}
	}
	if err := s.cat.Put(ctx, a); err != nil {
		return fmt.Errorf("preheat: %w", err)
	}
	s.publish(ctx, sale.Event{Kind: sale.EventActivity, Activity: a.ID})
	for _, sku := range a.SKUs {
		// A replaced activity may have stock again: clear stale flags.
		if n, err := s.Counts(ctx, a.ID, sku.ID); err == nil && n.Remaining > 0 {
			s.publish(ctx, sale.Event{Kind: sale.EventAvailable, Activity: a.ID, SKU: sku.ID})
		}
	}
	return nil
}

// SetState switches an activity ONLINE or OFFLINE on every SKU's shard and
// in the catalog, and tells the edges.
func (s *Stock) SetState(ctx context.Context, id int64, state string) error {
	if state != sale.StateOnline && state != sale.StateOffline {
		return fmt.Errorf("state must be %s or %s", sale.StateOnline, sale.StateOffline)
	}
	if err := s.cat.Load(ctx); err != nil {
		return err
	}
	cur, ok := s.cat.Activity(id)
	if !ok {
		return fmt.Errorf("activity %d: %w", id, ErrUnknownSKU)
	}
	a := *cur
	a.SKUs = append([]sale.SKU(nil), cur.SKUs...)
	a.State = state
	for _, sku := range a.SKUs {
		for _, b := range sku.BucketIndexes() {
			c := s.bucketClient(a.ID, &sku, b)
			k := sale.KeysIn(a.ID, sku.ID, b)
			if err := c.Do(ctx, c.B().Hset().Key(k.Meta).FieldValue().FieldValue("status", state).Build()).Error(); err != nil {
				return fmt.Errorf("set state activity %d sku %d: %w", id, sku.ID, err)
			}
		}
	}
	if err := s.cat.Put(ctx, a); err != nil {
		return err
	}
	s.publish(ctx, sale.Event{Kind: sale.EventActivity, Activity: id})
	return nil
}

// preheatSKU writes one SKU's meta and, where absent, its stock and sold
// counters: on each bucket's shard for a SKU split into buckets, the stock
// spread over them as evenly as possible (sale.SKU.BucketShare). A split
// SKU whose buckets are all missing is refilled with initial − ordered,
// spread; one that lost only some of them is refused (fail closed: what
// the lost buckets held is the watcher's to rebuild, RebuildBuckets).
func (s *Stock) preheatSKU(ctx context.Context, a *sale.Activity, sku *sale.SKU) error {
	if err := s.sameBuckets(ctx, a, sku); err != nil {
		return err
	}
	buckets := sku.BucketIndexes()
	missing := 0
	for _, b := range buckets {
		c := s.bucketClient(a.ID, sku, b)
		exists, err := c.Do(ctx, c.B().Exists().Key(sale.KeysIn(a.ID, sku.ID, b).Stock).Build()).AsInt64()
		if err != nil {
			return fmt.Errorf("preheat activity %d sku %d: %w", a.ID, sku.ID, err)
		}
		if exists == 0 {
			missing++
		}
	}
	if missing > 0 && missing < len(buckets) {
		return fmt.Errorf("preheat activity %d sku %d: %d of %d buckets lost their stock: %w", a.ID, sku.ID, missing, len(buckets), ErrStateLost)
	}
	var ordered int64
	if missing > 0 && s.ordered != nil {
		var err error
		if ordered, err = s.ordered(ctx, a.ID, sku.ID); err != nil {
			return fmt.Errorf("preheat activity %d sku %d: read orders: %w", a.ID, sku.ID, err)
		}
	}
	for _, b := range buckets {
		c := s.bucketClient(a.ID, sku, b)
		k := sale.KeysIn(a.ID, sku.ID, b)
		initial := sku.BucketShare(sku.Stock, b)
		stock := sku.BucketShare(max(sku.Stock-ordered, 0), b)
		sold := initial - stock // a bucket's share of the orders
		if b < 0 {
			sold = ordered
		}
		cmds := rueidis.Commands{
			c.B().Hset().Key(k.Meta).FieldValue().
				FieldValue("status", a.State).
				FieldValue("start_ms", strconv.FormatInt(a.Start.UnixMilli(), 10)).
				FieldValue("end_ms", strconv.FormatInt(a.End.UnixMilli(), 10)).
				FieldValue("limit", strconv.FormatInt(sku.LimitPerUser, 10)).
				FieldValue("price", strconv.FormatInt(int64(sku.Price), 10)).
				FieldValue("activity", strconv.FormatInt(a.ID, 10)).
				FieldValue("rebuy", rebuyField(a)).Build(),
			c.B().Hset().Key(k.Meta).FieldValue().FieldValue("initial", strconv.FormatInt(initial, 10)).Build(),
			c.B().Set().Key(k.Stock).Value(strconv.FormatInt(stock, 10)).Nx().Build(),
			c.B().Set().Key(k.Sold).Value(strconv.FormatInt(sold, 10)).Nx().Build(),
		}
		if b >= 0 && missing == 0 {
			// A live bucket keeps its own initial: restocks and the
			// share of the stock it was preheated with made it, and its
			// books (initial + in − out = remaining + sold) rest on it.
			cmds[1] = c.B().Hsetnx().Key(k.Meta).Field("initial").Value(strconv.FormatInt(initial, 10)).Build()
		}
		for _, r := range c.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
				return fmt.Errorf("preheat activity %d sku %d: %w", a.ID, sku.ID, err)
			}
		}
	}
	return nil
}

// rebuyField is meta's "rebuy": "0" where a buyer whose order was closed
// unpaid may not buy the SKU again (occupy reads it), else "1".
func rebuyField(a *sale.Activity) string {
	if a.Rebuy() {
		return "1"
	}
	return "0"
}

// ErrBucketsChanged: a preheat asked a SKU whose ledger is in Redis for
// another number of buckets. Its buyers' buckets (hash of the user mod the
// count) and the stock each bucket holds would no longer match: a buyer
// could hold a ticket in two buckets and the units of a dropped bucket
// would never sell.
var ErrBucketsChanged = errors.New("a preheated SKU's buckets cannot change")

// CheckBuckets answers ErrBucketsChanged when a would change the bucket
// count of a SKU whose ledger is in Redis (Preheat refuses it): the admin
// API asks before it writes the database.
func (s *Stock) CheckBuckets(ctx context.Context, a *sale.Activity) error {
	for i := range a.SKUs {
		if err := s.sameBuckets(ctx, a, &a.SKUs[i]); err != nil {
			return err
		}
	}
	return nil
}

// sameBuckets refuses a preheat of sku with a bucket count other than the
// one the catalog knows for it while any of that layout's stock keys
// exists in Redis.
func (s *Stock) sameBuckets(ctx context.Context, a *sale.Activity, sku *sale.SKU) error {
	_, old, ok := s.cat.Lookup(a.ID, sku.ID)
	if !ok || old.BucketCount() == sku.BucketCount() {
		return nil
	}
	for _, b := range old.BucketIndexes() {
		c := s.bucketClient(a.ID, old, b)
		n, err := c.Do(ctx, c.B().Exists().Key(sale.KeysIn(a.ID, sku.ID, b).Stock).Build()).AsInt64()
		if err != nil {
			return fmt.Errorf("preheat activity %d sku %d: %w", a.ID, sku.ID, err)
		}
		if n > 0 {
			return fmt.Errorf("preheat activity %d sku %d: %d buckets, was %d: %w",
				a.ID, sku.ID, sku.BucketCount(), old.BucketCount(), ErrBucketsChanged)
		}
	}
	return nil
}
