// Package timeouts hands out timeout channels that the callers of one short
// tick share: on a path that bounds every call by the same duration (an
// occupy, a produce), one runtime timer per tick replaces a timer and a
// context per call.
package timeouts

import (
	"sync"
	"sync/atomic"
	"time"
)

// Shared gives every caller of After within one tick the same channel,
// closed by one timer at least D after each of them asked and at most
// D + Tick after. Safe for concurrent use; it has no goroutine to stop (a
// tick's timer closes its channel and is gone).
type Shared struct {
	d, tick time.Duration
	mu      sync.Mutex // creating a tick's slot
	cur     atomic.Pointer[slot]
}

// slot is one tick's channel, closed d + tick after start.
type slot struct {
	start time.Time
	ch    chan struct{}
}

// TickDivisor sets New's tick: d / TickDivisor (at least a millisecond), so
// a timeout fires at most 1/64 of d late.
const TickDivisor = 64

// New returns a Shared for timeouts of d (> 0).
func New(d time.Duration) *Shared {
	return &Shared{d: d, tick: max(d/TickDivisor, time.Millisecond)}
}

// D is the timeout; Tick how much later than D a channel may close.
func (s *Shared) D() time.Duration    { return s.d }
func (s *Shared) Tick() time.Duration { return s.tick }

// After returns a channel that is closed no sooner than D from now and no
// later than D + Tick from now.
func (s *Shared) After() <-chan struct{} {
	now := time.Now()
	if c := s.cur.Load(); c != nil && now.Sub(c.start) < s.tick {
		return c.ch
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Another caller may have opened this tick meanwhile; a slot opened
	// after now fires later still, so it serves now too.
	if c := s.cur.Load(); c != nil && now.Sub(c.start) < s.tick {
		return c.ch
	}
	c := &slot{start: time.Now(), ch: make(chan struct{})}
	time.AfterFunc(s.d+s.tick, func() { close(c.ch) })
	s.cur.Store(c)
	return c.ch
}
