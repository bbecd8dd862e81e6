package ratelimit

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Gate is the per-SKU admission gate: it lets through at most
// K × remaining stock requests per second to the engine (but never fewer
// than Floor per second, so the last units always sell), with a burst of one
// second's worth (at least one request). Remaining is learned from the
// engine's answers and from events; a SKU whose remaining is unknown is not
// gated. K and Floor may be fractional (an edge's share of a gate shared by
// several) and may be changed while in use (Set). Safe for concurrent use;
// each SKU has its own small lock, and finding a SKU's state takes no lock
// and allocates nothing.
type Gate struct {
	rate atomic.Pointer[gateRate]
	now  func() time.Time
	skus skuMap[gateSKU]
}

type gateRate struct{ k, floor float64 }

type gateSKU struct {
	remaining atomic.Int64 // -1 unknown
	mu        sync.Mutex
	tokens    float64
	last      int64
}

func initGateSKU(s *gateSKU) { s.remaining.Store(-1) }

// NewGate returns a gate with factor k (k <= 0 disables it) and floor
// requests per second (floor <= 0 means 1).
func NewGate(k, floor float64, now func() time.Time) *Gate {
	if now == nil {
		now = time.Now
	}
	g := &Gate{now: now}
	g.Set(k, floor)
	return g
}

// Set changes k and floor (same meaning as NewGate's); the observed stock
// and each SKU's tokens are kept.
func (g *Gate) Set(k, floor float64) {
	if floor <= 0 {
		floor = 1
	}
	g.rate.Store(&gateRate{k: k, floor: floor})
}

// Rate returns k and floor in force (floor as Set stored it: at least 1).
func (g *Gate) Rate() (k, floor float64) {
	r := g.rate.Load()
	return r.k, r.floor
}

// Observe records the SKU's remaining stock (-1: unknown, which lifts the
// gate until the next observation). It records also while the gate is
// off, so a gate switched on by Set knows the stock at once.
func (g *Gate) Observe(sku, remaining int64) {
	if g == nil {
		return
	}
	if remaining < 0 {
		if s := g.skus.lookup(sku); s != nil {
			s.remaining.Store(-1)
		}
		return
	}
	g.skus.get(sku, initGateSKU).remaining.Store(remaining)
}

// Remaining is the last observed remaining stock of sku, -1 if unknown.
func (g *Gate) Remaining(sku int64) int64 {
	if g == nil {
		return -1
	}
	if s := g.skus.lookup(sku); s != nil {
		return s.remaining.Load()
	}
	return -1
}

// Allow reports whether one more request for sku may go to the engine now;
// if not, wait says when the next one may. No allocation.
func (g *Gate) Allow(sku int64) (bool, time.Duration) {
	if g == nil {
		return true, 0
	}
	r := g.rate.Load()
	if r.k <= 0 {
		return true, 0
	}
	s := g.skus.lookup(sku)
	if s == nil {
		return true, 0
	}
	rem := s.remaining.Load()
	if rem < 0 {
		return true, 0
	}
	rate := math.Max(r.k*float64(rem), r.floor)
	// A rate under 1/s (a small share of a shared gate) still lets one
	// request through once its time has come.
	burst := math.Max(rate, 1)
	now := g.now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == 0 {
		s.tokens, s.last = burst, now
	}
	s.tokens = math.Min(burst, s.tokens+rate*float64(now-s.last)/1e9)
	s.last = now
	if s.tokens >= 1 {
		s.tokens--
		return true, 0
	}
	return false, time.Duration((1 - s.tokens) / rate * 1e9)
}

// SKUs is the number of SKUs with a state (for metrics).
func (g *Gate) SKUs() int {
	if g == nil {
		return 0
	}
	return g.skus.len()
}
