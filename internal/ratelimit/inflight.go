package ratelimit

import "sync/atomic"

// Inflight bounds, per SKU, the purchase attempts in flight at once: past
// the bound the edge answers 429 at once instead of queueing one more buyer
// behind the others (where the wait would count against a timeout and end
// as 503). Every attempt is counted, also
// while the bound is off, so a bound set live applies to the attempts
// already inside. Safe for concurrent use; no lock is taken and nothing is
// allocated after a SKU's first attempt.
type Inflight struct {
	limit atomic.Int64 // <= 0: no bound
	skus  skuMap[inflightSKU]
}

type inflightSKU struct {
	n atomic.Int64
	_ [56]byte // a hot SKU's counter on its own cache line
}

// NewInflight returns a bound of limit attempts per SKU (limit <= 0: none).
func NewInflight(limit int) *Inflight {
	f := &Inflight{}
	f.SetLimit(limit)
	return f
}

// SetLimit changes the bound; attempts already inside stay and count.
func (f *Inflight) SetLimit(limit int) { f.limit.Store(int64(limit)) }

// Limit is the bound in force (<= 0: none).
func (f *Inflight) Limit() int { return int(f.limit.Load()) }

// Acquire takes a place for one attempt on sku. false means the SKU is at
// its bound and nothing was taken; every true must be paired with exactly
// one Release of the same sku. Two attempts racing for the last place may
// both be refused for an instant: the bound errs toward refusing, never
// toward letting more than limit in.
func (f *Inflight) Acquire(sku int64) bool {
	s := f.skus.get(sku, nil)
	n := s.n.Add(1)
	if lim := f.limit.Load(); lim > 0 && n > lim {
		s.n.Add(-1)
		return false
	}
	return true
}

// Release gives back the place an Acquire of sku took.
func (f *Inflight) Release(sku int64) {
	if s := f.skus.lookup(sku); s != nil {
		s.n.Add(-1)
	}
}

// InFlight is the number of attempts on sku inside now.
func (f *Inflight) InFlight(sku int64) int64 {
	if s := f.skus.lookup(sku); s != nil {
		return s.n.Load()
	}
	return 0
}
