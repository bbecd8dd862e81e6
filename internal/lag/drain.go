package lag

import "time"

// Drain estimates, from samples of a group's offsets, how long it needs to
// drain its lag. Not safe for concurrent use: one sampler owns it.
//
// The rate it drains at is measured between the commits seen in the last
// window samples (a group commits in steps — Sarama's auto-commit — so a
// sample between two commits says nothing of the rate), and only over the
// busy spans: those that began with at least as many messages waiting as
// the group committed by their end, so it could have worked the whole
// span. A group that keeps up with a light load commits what arrives,
// which says nothing of what it could do, and a sale's burst must not be
// judged at the pace of the quiet minute before it. Without a busy span in
// the window the last rate measured stands.
//
// The drain time is the lag at that rate, and at least as long as the lag
// has been waiting with nothing committed — counted from the first sample
// that found it so — which makes a stalled group visible whatever rate it
// had; and at least as long as the oldest message waiting has waited: the
// time since the first sample of the window whose newest offset is past
// the committed one (the window's span if every sample's is). A group
// slowed to one commit every few seconds, of what waited when its batch
// began, commits often enough to be no stall and may never show a busy
// span, but its oldest message shows how far behind it is — and a commit
// of a part of a lag, with no rate measured yet, does not read as
// drained. With fewer than two samples, or no lag, it is zero.
type Drain struct {
	window  int
	samples []drainSample // oldest first, at most window
	rate    float64       // the last busy rate measured
	since   time.Time     // the first sample of the current stall (lag, no commit); zero: not stalled
}

type drainSample struct {
	at  time.Time
	off Offsets
}

// Estimate is one reading of Drain.
type Estimate struct {
	Lag int64 // messages not yet committed
	// Committing is what the group committed per second over the window,
	// busy or not (0 while it is stalled).
	Committing float64
	// Rate is what it drains at when busy: the busy intervals' rate, or
	// the last one measured (0: never seen busy).
	Rate float64
	// Seconds is the lag at Rate, at least the time it has been stalled.
	Seconds float64
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
	e.Committing = float64(off.Committed-first.off.Committed) / at.Sub(first.at).Seconds()
	var busyN int64
	var busyT time.Duration
	from := -1 // the last sample that saw a commit
	for i := 1; i < len(d.samples); i++ {
		if d.samples[i].off.Committed == d.samples[i-1].off.Committed {
			continue
		}
		if from >= 0 {
			prev, s := d.samples[from], d.samples[i]
			if n := s.off.Committed - prev.off.Committed; prev.off.Lag() >= n {
				busyN += n
				busyT += s.at.Sub(prev.at)
			}
		}
		from = i
	}
	if busyN > 0 {
		d.rate = float64(busyN) / busyT.Seconds()
	}
	e.Rate = d.rate
	if e.Lag == 0 {
		return e
	}
	if e.Rate > 0 {
		e.Seconds = float64(e.Lag) / e.Rate
	}
	if !d.since.IsZero() {
		e.Seconds = max(e.Seconds, at.Sub(d.since).Seconds())
	}
	for _, s := range d.samples {
		if s.off.Newest > off.Committed {
			e.Seconds = max(e.Seconds, at.Sub(s.at).Seconds())
			break
		}
	}
	return e
}
