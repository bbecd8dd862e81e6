package sale

import (
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
