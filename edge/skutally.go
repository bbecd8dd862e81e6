package edge

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"seckill/catalog"
)

// Per-SKU purchase counts: every answer to a purchase of a SKU the catalog
// sells, counted under its activity and SKU as accepted (200 QUEUING) or
// rejected (any other answer: sold out, duplicate, rate limited, gate, not
// open, busy, …), in seckill_edge_sku_purchases_total{activity,sku,outcome}.
// The on-call page and `seckill admin watch` turn them into per-SKU rates.
//
// The hot path does no lookup for them: the counters of a SKU are resolved
// once, with its view (views.go), and counting is one atomic add on a
// Prometheus child held there. The series follow the catalog: each
// (activity, SKU) it holds has both series from the load that brought it,
// and those of a SKU that leaves it are dropped at the next load, so the
// cardinality is 2 × the catalog's (activity, SKU) pairs.

// skuTally is one (activity, SKU)'s pair of counters. Safe for concurrent
// use; a nil *skuTally counts nothing.
type skuTally struct {
	accepted, rejected prometheus.Counter
	freeN              freeCounts // the request log's minute counts (decisions.go)
}

// answered counts the answer ctx carries. No allocation, no lock.
func (c *skuTally) answered(ctx *fasthttp.RequestCtx) {
	if c == nil {
		return
	}
	if ctx.Response.StatusCode() == fasthttp.StatusOK {
		c.accepted.Inc()
	} else {
		c.rejected.Inc()
	}
}

type skuKey struct{ activity, sku int64 }

// skuTallies holds the tallies of the catalog's SKUs in an immutable map
// swapped on change, so that of reads it with one atomic load and no lock.
// Safe for concurrent use.
type skuTallies struct {
	vec *prometheus.CounterVec // seckill_edge_sku_purchases_total
	cat *catalog.Catalog
	m   atomic.Pointer[map[skuKey]*skuTally]
	mu  sync.Mutex // serialises sync and add; never taken for a SKU that has its tally
}

// Outcome label values of seckill_edge_sku_purchases_total.
const (
	skuAccepted = "accepted"
	skuRejected = "rejected"
)

func newSKUTallies(vec *prometheus.CounterVec, cat *catalog.Catalog) *skuTallies {
	t := &skuTallies{vec: vec, cat: cat}
	t.m.Store(&map[skuKey]*skuTally{})
	return t
}

// of returns the tally of (activity, sku), creating it on the first use of
// a SKU the catalog holds but the last sync did not see (a Put in this
// process). nil when the catalog does not hold it (any more).
func (t *skuTallies) of(activity, sku int64) *skuTally {
	if c, ok := (*t.m.Load())[skuKey{activity, sku}]; ok {
		return c
	}
	return t.add(activity, sku)
}

func (t *skuTallies) add(activity, sku int64) *skuTally {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.m.Load()
	k := skuKey{activity, sku}
	if c, ok := old[k]; ok {
		return c
	}
	// Checked under mu, as sync reads it: a SKU that left the catalog is
	// not brought back by a request resolved on an older snapshot.
	if _, _, ok := t.cat.Lookup(activity, sku); !ok {
		return nil
	}
	next := make(map[skuKey]*skuTally, len(old)+1)
	for k, c := range old {
		next[k] = c
	}
	next[k] = t.tally(k)
	t.m.Store(&next)
	return next[k]
}

func (t *skuTallies) tally(k skuKey) *skuTally {
	a, s := strconv.FormatInt(k.activity, 10), strconv.FormatInt(k.sku, 10)
	return &skuTally{accepted: t.vec.WithLabelValues(a, s, skuAccepted), rejected: t.vec.WithLabelValues(a, s, skuRejected)}
}

// sync makes the tallies those of the catalog's (activity, SKU) pairs:
// it creates the missing ones (at 0) and drops the series of pairs the
// catalog no longer holds. Runs after every catalog load.
func (t *skuTallies) sync() {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.m.Load()
	next := make(map[skuKey]*skuTally, len(old))
	for _, a := range t.cat.Activities() {
		for _, s := range a.SKUs {
			k := skuKey{a.ID, s.ID}
			if c, ok := old[k]; ok {
				next[k] = c
			} else {
				next[k] = t.tally(k)
			}
		}
	}
	for k := range old {
		if _, ok := next[k]; !ok {
			a, s := strconv.FormatInt(k.activity, 10), strconv.FormatInt(k.sku, 10)
			t.vec.DeleteLabelValues(a, s, skuAccepted)
			t.vec.DeleteLabelValues(a, s, skuRejected)
		}
	}
	t.m.Store(&next)
}
