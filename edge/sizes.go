package edge

import (
	"github.com/prometheus/client_golang/prometheus"

	"seckill/internal/ratelimit"
)

// sizes exports how full the edge's bounded local state is, read at
// scrape time (nothing on the request path): every cache's entries and
// capacity, every keyed limiter's keys and capacity, and the per-SKU
// layers' SKUs. A soak watches them to tell a bound that holds from state
// that grows with the crowd.
type sizes struct {
	s                                  *Server
	cacheEntries, cacheCap             *prometheus.Desc
	limiterKeys, limiterCap, skuStates *prometheus.Desc
	inflightAttempts                   *prometheus.Desc
}

func newSizes(s *Server) *sizes {
	return &sizes{
		s: s,
		cacheEntries: prometheus.NewDesc("seckill_edge_cache_entries",
			"Entries held by one of the edge's bounded caches (views, soldout, holders, risk_verdicts, db_misses).", []string{"cache"}, nil),
		cacheCap: prometheus.NewDesc("seckill_edge_cache_capacity_entries",
			"The most entries the cache can hold; it may evict before it is full (holders: a 2-way table, where a third buyer hashed to a full set of two overwrites the entry that expires first).", []string{"cache"}, nil),
		limiterKeys: prometheus.NewDesc("seckill_edge_limiter_entries",
			"Keys held by one of the edge's keyed rate limiters (ip, user, risk_device, risk_ip, db_reads).", []string{"limiter"}, nil),
		limiterCap: prometheus.NewDesc("seckill_edge_limiter_capacity_entries",
			"The most keys the limiter holds; a new key past it forgets the least recent one.", []string{"limiter"}, nil),
		skuStates: prometheus.NewDesc("seckill_edge_sku_state_entries",
			"SKUs with a state in a per-SKU layer (gate: the admission gate; inflight: the in-flight bound).", []string{"layer"}, nil),
		inflightAttempts: prometheus.NewDesc("seckill_edge_inflight_attempts",
			"Purchase attempts inside the per-SKU in-flight bound now, over every SKU.", nil, nil),
	}
}

func (z *sizes) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{z.cacheEntries, z.cacheCap, z.limiterKeys, z.limiterCap, z.skuStates, z.inflightAttempts} {
		ch <- d
	}
}

func (z *sizes) Collect(ch chan<- prometheus.Metric) {
	s := z.s
	s.evMu.RLock() // Shutdown closes the caches under evMu
	defer s.evMu.RUnlock()
	if s.closed {
		return
	}
	z.cache(ch, "views", s.views.cache)
	z.cache(ch, "soldout", s.flags.cache)
	if s.hold.slots != nil {
		ch <- prometheus.MustNewConstMetric(z.cacheEntries, prometheus.GaugeValue, float64(s.hold.entries(s.clock.now())), "holders")
		ch <- prometheus.MustNewConstMetric(z.cacheCap, prometheus.GaugeValue, float64(len(s.hold.slots)), "holders")
	}
	lim := s.admit.lim.Load()
	z.limiter(ch, "ip", lim.ip)
	z.limiter(ch, "user", lim.user)
	if s.risk != nil {
		if s.risk.cache != nil {
			z.cache(ch, "risk_verdicts", s.risk.cache)
		}
		z.limiter(ch, "risk_device", s.risk.fb.devices)
		z.limiter(ch, "risk_ip", s.risk.fb.ips)
	}
	if b := s.dbBound; b != nil {
		z.cache(ch, "db_misses", b.neg)
		z.limiter(ch, "db_reads", b.lim)
	}
	ch <- prometheus.MustNewConstMetric(z.skuStates, prometheus.GaugeValue, float64(s.admit.gate.SKUs()), "gate")
	n, attempts := s.admit.inflight.Sizes()
	ch <- prometheus.MustNewConstMetric(z.skuStates, prometheus.GaugeValue, float64(n), "inflight")
	ch <- prometheus.MustNewConstMetric(z.inflightAttempts, prometheus.GaugeValue, float64(attempts))
}

// costs is what sizes reads of a ristretto cache.
type costs interface {
	MaxCost() int64
	RemainingCost() int64
}

// cache reports a cache whose every entry costs 1 (IgnoreInternalCost):
// its cost used is its entries.
func (z *sizes) cache(ch chan<- prometheus.Metric, name string, c costs) {
	capacity := c.MaxCost()
	ch <- prometheus.MustNewConstMetric(z.cacheEntries, prometheus.GaugeValue, float64(capacity-c.RemainingCost()), name)
	ch <- prometheus.MustNewConstMetric(z.cacheCap, prometheus.GaugeValue, float64(capacity), name)
}

// limiter reports a keyed limiter; a disabled one (nil) is left out.
func (z *sizes) limiter(ch chan<- prometheus.Metric, name string, l *ratelimit.Local) {
	if l == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(z.limiterKeys, prometheus.GaugeValue, float64(l.Len()), name)
	ch <- prometheus.MustNewConstMetric(z.limiterCap, prometheus.GaugeValue, float64(l.Cap()), name)
}
