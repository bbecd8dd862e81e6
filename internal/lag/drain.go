package lag

import "time"

// Drain estimates, from samples of a group's offsets, how long it needs to
// drain its lag: the lag over the rate it committed over the last window
// samples (or, while it commits nothing, the last rate it had), and at
// least as long as the lag has been waiting without the group committing
// anything. Not safe for concurrent use: one sampler owns it.
//
// The second bound is what makes a stalled group visible: one that commits
// nothing while messages wait needs ever longer, counted from the first
// sample that found the lag waiting with no commit since the one before,
// whatever rate it had before; a group that has no lag, or commits at every
// sample, is never stalled. With fewer than two
// samples, or no lag, the estimate is zero.
type Drain struct {
	window  int
	samples []drainSample // oldest first, at most window
	rate    float64       // the last positive rate measured
	since   time.Time     // the first sample of the current stall (lag, no commit); zero: not stalled
}

type drainSample struct {
	at  time.Time
	off Offsets
}

// Estimate is one reading of Drain.
type Estimate struct {
	Lag     int64   // messages not yet committed
	Rate    float64 // messages committed per second over the window (0 while stalled)
	Seconds float64 // seconds to drain: Lag at the last positive rate, at least the time stalled
}

// NewDrain returns an estimator over the last window samples (at least 2).
func NewDrain(window int) *Drain {
	window = max(window, 2)
	return &Drain{window: window, samples: make([]drainSample, 0, window)}
}

// Observe adds a sample taken at at and returns the estimate with it. A
// sample whose committed offset went back (a topic recreated, a group
// reset) or whose time did not move on starts afresh.
func (d *Drain) Observe(at time.Time, off Offsets) Estimate {
	if n := len(d.samples); n > 0 {
		last := d.samples[n-1]
		switch {
		case off.Committed < last.off.Committed || !at.After(last.at):
			*d = Drain{window: d.window, samples: d.samples[:0]}
		case off.Committed > last.off.Committed:
			d.since = time.Time{}
		}
	}
	switch {
	case off.Lag() == 0:
		d.since = time.Time{}
	case d.since.IsZero() && (len(d.samples) == 0 || off.Committed == d.samples[len(d.samples)-1].off.Committed):
		d.since = at
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
	if e.Rate = float64(off.Committed-first.off.Committed) / at.Sub(first.at).Seconds(); e.Rate > 0 {
		d.rate = e.Rate
	}
	if e.Lag == 0 {
		return e
	}
	if d.rate > 0 {
		e.Seconds = float64(e.Lag) / d.rate
	}
	if !d.since.IsZero() {
		e.Seconds = max(e.Seconds, at.Sub(d.since).Seconds())
	}
	return e
}
