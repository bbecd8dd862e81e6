package sale

import (
	"regexp"
	"testing"
	"time"
)

func TestRequestNoTimeReadsTheTimestampBack(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123e6, time.UTC)
	g := NewRequestNos(1023)
	g.now = func() time.Time { return at }
	for range 5000 { // past one millisecond's sequence space: the clock is frozen
		rn := g.Next()
		got, ok := RequestNoTime(rn)
		if !ok || got.Before(at) || got.After(at.Add(2*time.Millisecond)) {
			t.Fatalf("RequestNoTime(%s) = %v, %v; want about %v", rn, got, ok, at)
		}
	}
	for _, bad := range []string{"", "abc", "-5", "0", "poison-1"} {
		if _, ok := RequestNoTime(bad); ok {
			t.Errorf("RequestNoTime(%q) claimed a time", bad)
		}
	}
}

// TestRequestAndOrderNumbersFollowTheDocumentedLayout checks the numbers
// against the README's rule ("Numbers"), computed by hand here: at
// 2026-03-01 12:00:00.123 UTC, 790 days and 12 h after 2024-01-01, the
// milliseconds are 68,299,200,123; node 5 puts 5<<12 beside them, and the
// sequence counts within the millisecond.
func TestRequestAndOrderNumbersFollowTheDocumentedLayout(t *testing.T) {
	g := NewRequestNos(5)
	g.now = func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 123e6, time.UTC) }
	for i, want := range []string{"286467608272719872", "286467608272719873", "286467608272719874"} {
		rn := g.Next()
		if rn != want {
			t.Errorf("ticket %d at a frozen clock: %s, want %s", i, rn, want)
		}
		if o := OrderNo(rn); o != "O"+want {
			t.Errorf("order of ticket %s: %s, want O%s", rn, o, want)
		}
	}
	// A number of today's clock has the documented form.
	orderNo := regexp.MustCompile(`^O[1-9][0-9]{0,18}$`)
	if rn := NewRequestNos(1023).Next(); !orderNo.MatchString(OrderNo(rn)) {
		t.Errorf("order of a ticket issued now: %q", OrderNo(rn))
	}
}
