package edge

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2"

	"seckill/catalog"
	"seckill/sale"
)

// view is what the order path needs of the activity a SKU resolves to,
// precomputed from the catalog. Views of the SKU's current activity are
// cached per SKU in a ristretto cache; a cached view is used only while its
// generation matches the catalog's (bumped on every load and activity
// event) and server time is before until.
type view struct {
	gen          uint64
	until        int64 // server unix nanos: the next window boundary of any activity selling the SKU, or ViewTTL
	activity     int64
	start, end   int64 // server unix nanos
	lineOpens    int64 // server unix nanos: start less the pre-queue (sale.Activity.LineOpens)
	offline      bool
	requireToken bool
	// act and sku are the catalog entries resolved (read only): what the
	// engine is handed, so that it does not resolve the SKU again.
	act *sale.Activity
	sku *sale.SKU
	// tally counts the answers to purchases of this SKU of this activity
	// (skutally.go); nil counts nothing.
	tally *skuTally
}

func makeView(a *sale.Activity, k *sale.SKU) view {
	return view{
		activity:     a.ID,
		start:        a.Start.UnixNano(),
		end:          a.End.UnixNano(),
		lineOpens:    a.LineOpens().UnixNano(),
		offline:      a.State == sale.StateOffline,
		requireToken: a.RequireToken,
		act:          a,
		sku:          k,
	}
}

// views are the edge's catalog views: the catalog snapshot (refreshed every
// edge.refresh_interval, on activity events and when the engine's answers
// show it stale) and the per-SKU views built from it. Safe for concurrent
// use; resolve takes no lock.
type views struct {
	cat     *catalog.Catalog
	tallies *skuTallies                    // per (activity, SKU), synced with every load
	cache   *ristretto.Cache[int64, *view] // SKU -> view of its current activity
	gen     atomic.Uint64                  // of the catalog; see view
	ttl     time.Duration                  // edge.view_ttl
	kick    chan struct{}                  // asks the loader for a catalog load now
	// lastDisagree rate-limits the catalog reloads triggered when the
	// engine's answer shows the local catalog is stale.
	lastDisagree atomic.Int64
}

func newViews(cat *catalog.Catalog, tallies *skuTallies, ttl time.Duration) (*views, error) {
	// Sized so that admission never refuses an entry for any realistic
	// number of SKUs (cost 1 each).
	cache, err := ristretto.NewCache(&ristretto.Config[int64, *view]{
		NumCounters: 1 << 18, MaxCost: 1 << 16, BufferItems: 64, IgnoreInternalCost: true,
	})
	if err != nil {
		return nil, fmt.Errorf("edge view cache: %w", err)
	}
	return &views{cat: cat, tallies: tallies, cache: cache, ttl: ttl, kick: make(chan struct{}, 1)}, nil
}

// resolve finds the activity that sells sku: the one named, or the SKU's
// current one at server time now.
func (v *views) resolve(activity, sku, now int64) (view, bool) {
	if activity != 0 {
		a, k, ok := v.cat.Lookup(activity, sku)
		if !ok {
			return view{}, false
		}
		c := makeView(a, k)
		c.tally = v.tallies.of(a.ID, k.ID) // lock-free: an immutable map
		return c, true
	}
	// Read the generation before the catalog: a load stores its snapshot
	// and then bumps the generation, so a view can never carry a newer
	// generation than the snapshot it was built from.
	gen := v.gen.Load()
	if c, ok := v.cache.Get(sku); ok && c.gen == gen && now < c.until {
		return *c, true
	}
	a, k, ok := v.cat.Current(sku, time.Unix(0, now))
	if !ok {
		// Unknown SKUs are not cached: the catalog answers them from a map
		// miss, and caching them would let a scan of ids fill the cache.
		return view{}, false
	}
	c := makeView(a, k)
	c.tally = v.tallies.of(a.ID, k.ID)
	c.gen = gen
	c.until = v.nextBoundary(sku, now)
	// No ristretto TTL (it costs a clock read on every Get): until, at
	// most now+ViewTTL, already ends the view.
	v.cache.Set(sku, &c, 1)
	return c, true
}

// nextBoundary is the first start or end after now of any activity that
// sells sku (where catalog.Current may change its answer), capped at
// now+ViewTTL. Runs on a view miss only.
func (v *views) nextBoundary(sku, now int64) int64 {
	until := now + int64(v.ttl)
	for _, a := range v.cat.Activities() {
		if a.SKU(sku) == nil {
			continue
		}
		for _, t := range [2]int64{a.Start.UnixNano(), a.End.UnixNano()} {
			if t > now && t < until {
				until = t
			}
		}
	}
	return until
}

// current is the ID of the activity that sells sku at server time now.
func (v *views) current(sku, now int64) (int64, bool) {
	a, _, ok := v.cat.Current(sku, time.Unix(0, now))
	if !ok {
		return 0, false
	}
	return a.ID, true
}

// load is the catalog refresh's step: a fresh snapshot also drops the
// views cached on the old one.
func (v *views) load(ctx context.Context) error {
	if err := v.cat.Load(ctx); err != nil {
		return err
	}
	// Before the generation moves: the views built on the new snapshot
	// hold the tallies of its SKUs.
	v.tallies.sync()
	v.gen.Add(1)
	return nil
}

// invalidate drops every cached view now (they are rebuilt on next use).
func (v *views) invalidate() { v.gen.Add(1) }

// triggerLoad asks the loader for a catalog load now; requests coalesce.
func (v *views) triggerLoad() {
	select {
	case v.kick <- struct{}{}:
	default:
	}
}

// reloadSoon triggers a catalog load at most once a second.
func (v *views) reloadSoon() {
	now := time.Now().UnixNano()
	last := v.lastDisagree.Load()
	if now-last < int64(time.Second) || !v.lastDisagree.CompareAndSwap(last, now) {
		return
	}
	v.triggerLoad()
}

// close releases the cache; resolve must not run after it.
func (v *views) close() { v.cache.Close() }
