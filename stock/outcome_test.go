package stock

import (
	"errors"
	"fmt"
	"testing"
)

// TestOutcomeTableRoundTrips: every outcome is found again from its error
// (also wrapped), its wire code and, where a script answers it, its script
// code; anything the table does not know is busy.
func TestOutcomeTableRoundTrips(t *testing.T) {
	for o := OK; o < nOutcomes; o++ {
		t.Run(o.String(), func(t *testing.T) {
			if got := OutcomeOf(o.Err()); got != o {
				t.Errorf("OutcomeOf(%v) = %v", o.Err(), got)
			}
			if o != OK {
				if got := OutcomeOf(fmt.Errorf("occupy sku 7: %w", o.Err())); got != o {
					t.Errorf("wrapped %v: %v", o.Err(), got)
				}
			}
			if got, ok := OutcomeOfWire(o.Wire()); !ok || got != o {
				t.Errorf("OutcomeOfWire(%q) = %v, %v", o.Wire(), got, ok)
			}
			if c := outcomes[o].code; c != "" {
				if got, ok := OutcomeOfCode(c); !ok || got != o {
					t.Errorf("OutcomeOfCode(%q) = %v, %v", c, got, ok)
				}
				if err := (OccupyResult{Code: c}).Err(); err != o.Err() {
					t.Errorf("OccupyResult{%s}.Err() = %v, want %v", c, err, o.Err())
				}
			}
		})
	}
	if got := OutcomeOf(ErrStateLost); got != Missing {
		t.Errorf("ErrStateLost, which wraps ErrBusy, is %v, want Missing", got)
	}
	if got := OutcomeOf(errors.New("redis: connection refused")); got != Busy {
		t.Errorf("an unknown error is %v, want Busy", got)
	}
	if _, ok := OutcomeOfCode("PERHAPS"); ok {
		t.Error("an unknown script code was found")
	}
	if err := (OccupyResult{Code: "PERHAPS"}).Err(); !errors.Is(err, ErrBusy) {
		t.Errorf("an unknown script code answers %v, want busy", err)
	}
	if _, ok := OutcomeOfWire("PERHAPS"); ok {
		t.Error("an unknown wire code was found")
	}
	if got := OutcomeOf(ErrRebalancing); got != Rebalancing || !errors.Is(ErrRebalancing, ErrRateLimited) {
		t.Errorf("ErrRebalancing, which wraps ErrRateLimited, is %v, want Rebalancing", got)
	}
	want := []string{"ok", "not_open", "ended", "sold_out", "duplicate", "over_limit", "rebalancing", "rate_limited", "missing", "error"}
	var got []string
	for o := range Outcomes {
		if l := Outcome(o).Label(); l != "" {
			got = append(got, l)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("labels %v, want %v", got, want)
	}
}
