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
// second's worth. Remaining is learned from the engine's answers and from
// events; a SKU whose remaining is unknown is not gated. Safe for concurrent
// use; each SKU has its own small lock, and finding a SKU's state takes no
// lock and allocates nothing (an immutable map swapped on the rare insert).
type Gate struct {
	k     float64
	floor float64
	now   func() time.Time
	mu    sync.Mutex // serialises inserts into skus
	skus  atomic.Pointer[map[int64]*gateSKU]
}

type gateSKU struct {
	remaining atomic.Int64 // -1 unknown
	mu        sync.Mutex
	tokens    float64
	last      int64
}

// NewGate returns a gate with factor k (k <= 0 disables it) and floor
// requests per second (at least 1).
func NewGate(k, floor float64, now func() time.Time) *Gate {
	if now == nil {
		now = time.Now
	}
	return &Gate{k: k, floor: math.Max(floor, 1), now: now}
}

// lookup returns the SKU's state, or nil when nothing was observed for it.
func (g *Gate) lookup(id int64) *gateSKU {
	if m := g.skus.Load(); m != nil {
		return (*m)[id]
	}
	return nil
}

// sku returns the SKU's state, creating it (copy on write: SKUs are few and
// created once each).
func (g *Gate) sku(id int64) *gateSKU {
	if s := g.lookup(id); s != nil {
		return s
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.skus.Load()
	if old != nil {
		if s := (*old)[id]; s != nil {
			return s
		}
	}
	next := make(map[int64]*gateSKU, 1)
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	s := &gateSKU{}
	s.remaining.Store(-1)
	next[id] = s
	g.skus.Store(&next)
	return s
}

// Observe records the SKU's remaining stock (-1: unknown, which lifts the
// gate until the next observation).
func (g *Gate) Observe(sku, remaining int64) {
	if g == nil || g.k <= 0 {
		return
	}
	if remaining < 0 {
		if s := g.lookup(sku); s != nil {
			s.remaining.Store(-1)
		}
		return
	}
	g.sku(sku).remaining.Store(remaining)
}

// Remaining is the last observed remaining stock of sku, -1 if unknown.
func (g *Gate) Remaining(sku int64) int64 {
	if g == nil {
		return -1
	}
	if s := g.lookup(sku); s != nil {
		return s.remaining.Load()
	}
	return -1
}

// Allow reports whether one more request for sku may go to the engine now;
// if not, wait says when the next one may. No allocation.
func (g *Gate) Allow(sku int64) (bool, time.Duration) {
	if g == nil || g.k <= 0 {
		return true, 0
	}
	s := g.lookup(sku)
	if s == nil {
		return true, 0
	}
	rem := s.remaining.Load()
	if rem < 0 {
		return true, 0
	}
	rate := math.Max(g.k*float64(rem), g.floor)
	now := g.now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == 0 {
		s.tokens, s.last = rate, now
	}
	s.tokens = math.Min(rate, s.tokens+rate*float64(now-s.last)/1e9)
	s.last = now
	if s.tokens >= 1 {
		s.tokens--
		return true, 0
	}
	return false, time.Duration((1 - s.tokens) / rate * 1e9)
}
