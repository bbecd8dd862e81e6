package lag

import (
	"testing"
	"time"
)

func TestDrainEstimate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	type obs struct {
		s                 int
		newest, committed int64
	}
	for _, tc := range []struct {
		name    string
		window  int
		samples []obs
		want    Estimate
	}{
		{"one sample says nothing yet", 4, []obs{{0, 500, 0}}, Estimate{Lag: 500}},
		{"no lag is no backlog whatever the rate", 4, []obs{{0, 0, 0}, {1, 100, 100}}, Estimate{Committing: 100}},
		{"a busy group's lag over the rate it committed between commits", 4, []obs{{0, 300, 0}, {1, 600, 100}, {2, 900, 200}, {3, 1200, 300}},
			Estimate{Lag: 900, Committing: 100, Rate: 100, Seconds: 9}},
		{"only the window's samples count", 3, []obs{{0, 2000, 0}, {1, 2000, 1000}, {2, 2100, 1010}, {3, 2200, 1020}},
			Estimate{Lag: 1180, Committing: 10, Rate: 10, Seconds: 118}},
		// A group that keeps up with 10 messages a second has ~5 waiting
		// after each commit; a burst of 5,000 is then not judged at 10/s.
		{"a group keeping up with a light load is not judged at its pace", 5, []obs{{0, 5, 0}, {1, 15, 10}, {2, 25, 20}, {3, 35, 30}, {4, 5035, 40}},
			Estimate{Lag: 4995, Committing: 10}},
		{"the burst's first busy span gives the rate", 5, []obs{{0, 5, 0}, {1, 15, 10}, {2, 5015, 20}, {3, 5025, 3020}, {4, 8035, 6020}},
			Estimate{Lag: 2015, Committing: 6020.0 / 4, Rate: 3000, Seconds: 2015.0 / 3000}},
		// Commits every 4th sample, of what arrived since: the samples
		// between say nothing, and a group that keeps up is not busy —
		// its drain time is how long its oldest waiting message waited
		// (the ones past 600 arrived by 5 s).
		{"a group that commits in steps and keeps up is measured by its steps", 8, []obs{{0, 120, 0}, {1, 240, 120}, {2, 360, 120}, {3, 480, 120}, {4, 600, 120}, {5, 720, 600}, {6, 840, 600}, {7, 960, 600}},
			Estimate{Lag: 360, Committing: 600.0 / 7, Seconds: 2}},
		// Never seen busy, it stalled 5 s with 1,000 waiting, then
		// committed 200: the other 800 have waited 5 s, not none.
		{"a commit of part of a lag with no rate measured is no drain", 8, []obs{{0, 1000, 1000}, {1, 2000, 1000}, {5, 2000, 1000}, {6, 2000, 1200}},
			Estimate{Lag: 800, Committing: 200.0 / 6, Seconds: 5}},
		{"the first messages of a sale have waited no time", 3, []obs{{0, 0, 0}, {1, 0, 0}, {2, 50, 0}},
			Estimate{Lag: 50}},
		{"a lag that waits with nothing committed needs at least as long as it waited", 4, []obs{{0, 10, 0}, {1, 30, 0}, {2, 50, 0}, {5, 60, 0}},
			Estimate{Lag: 60, Seconds: 5}},
		// A partition: nothing committed for 5 s, then the consumer
		// resumes at 400/s; the stalled intervals are not a rate.
		// Nothing committed for 5 s, then 500 at once: the span is not a
		// rate of 100/s (it began with 100 waiting), and the stall is over.
		{"a partition's span is no rate once it is over", 8, []obs{{0, 100, 0}, {1, 200, 100}, {2, 300, 100}, {3, 400, 100}, {4, 500, 100}, {5, 600, 100}, {6, 700, 600}},
			Estimate{Lag: 100, Committing: 100}},
		{"a stall is judged at the last busy rate the group had", 3, []obs{{0, 200, 0}, {1, 300, 100}, {2, 400, 200}, {3, 1000, 200}, {4, 2000, 200}},
			Estimate{Lag: 1800, Rate: 100, Seconds: 18}},
		{"a stall longer than the lag at the last rate counts as long as it lasts", 3, []obs{{0, 200, 0}, {1, 300, 100}, {2, 400, 200}, {3, 410, 200}, {30, 420, 200}},
			Estimate{Lag: 220, Rate: 100, Seconds: 28}}, // the ones past 200 waited since 2 s
		{"a group reset starts afresh", 3, []obs{{0, 100, 100}, {1, 200, 200}, {2, 300, 10}},
			Estimate{Lag: 290}},
		{"a clock that did not move starts afresh", 3, []obs{{0, 100, 0}, {1, 200, 50}, {1, 300, 60}},
			Estimate{Lag: 240}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDrain(tc.window)
			var got Estimate
			for _, o := range tc.samples {
				got = d.Observe(at(o.s), Offsets{Newest: o.newest, Committed: o.committed})
			}
			if got != tc.want {
				t.Fatalf("estimate %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestOffsetsLagNeverNegative(t *testing.T) {
	if n := (Offsets{Newest: 5, Committed: 9}).Lag(); n != 0 {
		t.Fatalf("lag %d, want 0", n)
	}
}
