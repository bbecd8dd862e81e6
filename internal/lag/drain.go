package lag

import (
	"math"
	"time"
)

// Drain estimates, from samples of a group's offsets, how long it needs to
// drain its lag at the rate it has been committing: the messages it
// committed over the last Window samples, per second of them. Not safe for
// concurrent use: one sampler owns it.
//
// The estimate errs toward "no backlog" until it knows better: with fewer
// than two samples, or no lag, it is zero. A group that committed nothing
// over the whole window while a lag waited at every sample of it is
// stalled: its drain time is +Inf. One that committed nothing while the
// lag only just appeared (the first messages of a sale, not yet fetched)
// is not judged yet: zero.
type Drain struct {
	window  int
	samples []drainSample // oldest first, at most window
}

type drainSample struct {
	at  time.Time
	off Offsets
}

// Estimate is one reading of Drain.
type Estimate struct {
	Lag     int64   // messages not yet committed
	Rate    float64 // messages committed per second over the window
	Seconds float64 // Lag / Rate: seconds to drain at that rate; +Inf when stalled
}

// NewDrain returns an estimator over the last window samples (at least 2).
func NewDrain(window int) *Drain {
	window = max(window, 2)
	return &Drain{window: window, samples: make([]drainSample, 0, window)}
}

// Observe adds a sample taken at at and returns the estimate with it. A
// sample whose committed offset went back (a topic recreated, a group
// reset) or whose time did not move on starts the window afresh.
func (d *Drain) Observe(at time.Time, off Offsets) Estimate {
	if n := len(d.samples); n > 0 {
		if last := d.samples[n-1]; off.Committed < last.off.Committed || !at.After(last.at) {
			d.samples = d.samples[:0]
		}
	}
	if len(d.samples) == d.window {
		copy(d.samples, d.samples[1:])
		d.samples = d.samples[:d.window-1]
	}
	d.samples = append(d.samples, drainSample{at, off})
	e := Estimate{Lag: off.Lag()}
	if len(d.samples) < 2 {
		return e
	}
	first := d.samples[0]
	e.Rate = float64(off.Committed-first.off.Committed) / at.Sub(first.at).Seconds()
	switch {
	case e.Lag == 0:
	case e.Rate > 0:
		e.Seconds = float64(e.Lag) / e.Rate
	case len(d.samples) == d.window && d.lagThroughout():
		e.Seconds = math.Inf(1)
	}
	return e
}

// lagThroughout reports whether every sample in the window saw a lag.
func (d *Drain) lagThroughout() bool {
	for _, s := range d.samples {
		if s.off.Lag() == 0 {
			return false
		}
	}
	return true
}
