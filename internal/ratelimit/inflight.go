package ratelimit

import (
	"sync"
	"sync/atomic"
	"time"
)

// Inflight bounds, per SKU, the purchase attempts in flight at once: past
// the bound an attempt waits (parked, no CPU) up to a bounded time for a
// place, and is answered 429 after it, instead of queueing behind the
// others inside the engine, where the wait would count against a timeout
// and end as 503. Every attempt is counted, also while the bound is off, so
// a bound set live applies to the attempts already inside. Safe for
// concurrent use; no lock is taken and nothing is allocated after a SKU's
// first attempt (timers are pooled).
type Inflight struct {
	limit atomic.Int64 // <= 0: no bound
	wait  atomic.Int64 // nanoseconds an attempt past the bound waits for a place
	skus  skuMap[inflightSKU]
}

type inflightSKU struct {
	n atomic.Int64
	// bell wakes one waiter when a place frees. One token at most: a
	// waiter that gets a place rings again while places are left, so
	// releases that found the bell full are passed on, not lost.
	bell chan struct{}
	_    [48]byte // a hot SKU's counter on its own cache line
}

func initInflightSKU(s *inflightSKU) { s.bell = make(chan struct{}, 1) }

var timers = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

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

// SetWait changes how long an attempt past the bound waits for a place
// before it is refused (<= 0: refused at once).
func (f *Inflight) SetWait(d time.Duration) { f.wait.Store(int64(d)) }

// Wait is the wait in force.
func (f *Inflight) Wait() time.Duration { return time.Duration(f.wait.Load()) }

// Acquire takes a place for one attempt on sku. false means the SKU is at
// its bound and nothing was taken; every true must be paired with exactly
// one Release of the same sku. Two attempts racing for the last place may
// both be refused for an instant: the bound errs toward refusing, never
// toward letting more than limit in.
func (f *Inflight) Acquire(sku int64) bool {
	return f.try(f.skus.get(sku, initInflightSKU))
}

func (f *Inflight) try(s *inflightSKU) bool {
	n := s.n.Add(1)
	if lim := f.limit.Load(); lim > 0 && n > lim {
		s.n.Add(-1)
		return false
	}
	return true
}

// AcquireWait is Acquire, but past the bound it waits up to the configured
// wait (SetWait) for a place to free. false means none freed in time and
// nothing was taken.
func (f *Inflight) AcquireWait(sku int64) bool {
	s := f.skus.get(sku, initInflightSKU)
	if f.try(s) {
		return true
	}
	wait := time.Duration(f.wait.Load())
	if wait <= 0 {
		return false
	}
	t := timers.Get().(*time.Timer)
	t.Reset(wait)
	defer func() {
		t.Stop() // Go >= 1.23: no stale tick survives Stop, so the timer is reusable
		timers.Put(t)
	}()
	for {
		select {
		case <-s.bell:
			if f.try(s) {
				if lim := f.limit.Load(); lim <= 0 || s.n.Load() < lim {
					f.ring(s) // places left: pass the wake on
				}
				return true
			}
		case <-t.C:
			return false
		}
	}
}

func (f *Inflight) ring(s *inflightSKU) {
	select {
	case s.bell <- struct{}{}:
	default: // a wake is pending already
	}
}

// Release gives back the place an Acquire of sku took, and wakes one
// attempt waiting for it.
func (f *Inflight) Release(sku int64) {
	if s := f.skus.lookup(sku); s != nil {
		s.n.Add(-1)
		f.ring(s)
	}
}

// InFlight is the number of attempts on sku inside now.
func (f *Inflight) InFlight(sku int64) int64 {
	if s := f.skus.lookup(sku); s != nil {
		return s.n.Load()
	}
	return 0
}

// Sizes are the SKUs with a counter and the attempts inside over all of
// them (for metrics; a read of each counter, no lock).
func (f *Inflight) Sizes() (skus int, attempts int64) {
	m := f.skus.m.Load()
	if m == nil {
		return 0, 0
	}
	for _, s := range *m {
		attempts += s.n.Load()
	}
	return len(*m), attempts
}
