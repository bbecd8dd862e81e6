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
// use; each SKU has its own small lock.
type Gate struct {
	k     float64
	floor float64
	now   func() time.Time
	skus  sync.Map // sku id -> *gateSKU
}

type gateSKU struct {
	remaining atomic.Int64 // -1 unknown
	mu        sync.Mutex
	tokens    float64
	last      int64
}

// NewGate returns a gate with factor k (k <= 0 disables it) and floor
// requests per second.
func NewGate(k, floor float64, now func() time.Time) *Gate {
	if now == nil {
		now = time.Now
	}
	return &Gate{k: k, floor: math.Max(floor, 1), now: now}
}

func (g *Gate) sku(id int64) *gateSKU {
	if v, ok := g.skus.Load(id); ok {
		return v.(*gateSKU)
	}
	s := &gateSKU{}
	s.remaining.Store(-1)
	v, _ := g.skus.LoadOrStore(id, s)
	return v.(*gateSKU)
}

// Observe records the SKU's remaining stock (-1: unknown).
func (g *Gate) Observe(sku, remaining int64) {
	if g == nil || g.k <= 0 {
		return
	}
	g.sku(sku).remaining.Store(remaining)
}

// Allow reports whether one more request for sku may go to the engine now;
// if not, wait says when the next one may.
func (g *Gate) Allow(sku int64) (bool, time.Duration) {
	if g == nil || g.k <= 0 {
		return true, 0
	}
	s := g.sku(sku)
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
