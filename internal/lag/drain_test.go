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
		{"no lag is no backlog whatever the rate", 4, []obs{{0, 0, 0}, {1, 100, 100}}, Estimate{Rate: 100}},
		{"lag over the rate committed in the window", 4, []obs{{0, 100, 0}, {1, 400, 100}, {2, 700, 200}},
			Estimate{Lag: 500, Rate: 100, Seconds: 5}},
		{"only the window's samples count", 3, []obs{{0, 0, 0}, {1, 1000, 1000}, {2, 1100, 1010}, {3, 1200, 1020}},
			Estimate{Lag: 180, Rate: 10, Seconds: 18}},
		{"the first messages of a sale, not fetched yet, have waited no time", 3, []obs{{0, 0, 0}, {1, 0, 0}, {2, 50, 0}},
			Estimate{Lag: 50}},
		{"a lag that waits with nothing committed needs at least as long as it waited", 4, []obs{{0, 10, 0}, {1, 30, 0}, {2, 50, 0}, {5, 60, 0}},
			Estimate{Lag: 60, Seconds: 5}},
		{"a stall is judged at the last rate the group had", 2, []obs{{0, 0, 0}, {1, 100, 100}, {2, 200, 200}, {3, 1000, 200}, {4, 2000, 200}},
			Estimate{Lag: 1800, Seconds: 18}},
		{"a stall longer than the lag at the last rate counts as long as it lasts", 2, []obs{{0, 0, 0}, {1, 100, 100}, {2, 110, 100}, {30, 120, 100}},
			Estimate{Lag: 20, Seconds: 28}},
		{"a commit ends a stall", 3, []obs{{0, 100, 0}, {5, 200, 0}, {6, 300, 290}},
			Estimate{Lag: 10, Rate: 290.0 / 6, Seconds: 10 / (290.0 / 6)}},
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
