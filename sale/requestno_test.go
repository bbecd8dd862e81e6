package sale

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRequestNoTimeReadsTheTimestampBack(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123e6, time.UTC)
	g := NewRequestNos(1023)
	g.now = func() time.Time { return at }
	for range 5000 { // past one millisecond's sequence space: the clock is frozen
		rn := g.Next(7, 7001)
		got, ok := RequestNoTime(rn)
		if !ok || got.Before(at) || got.After(at.Add(2*time.Millisecond)) {
			t.Fatalf("RequestNoTime(%s) = %v, %v; want about %v", rn, got, ok, at)
		}
		// The bare id, the form numbers had before they named their SKU,
		// is read too.
		_, _, id, _ := ParseRequestNo(rn)
		if old, ok := RequestNoTime(id); !ok || !old.Equal(got) {
			t.Fatalf("RequestNoTime(%s) = %v, %v; want %v", id, old, ok, got)
		}
	}
	for _, bad := range []string{"", "abc", "-5", "0", "poison-1", "7-7001-", "7-7001-0", "7-7001-x1", "7--1"} {
		if _, ok := RequestNoTime(bad); ok {
			t.Errorf("RequestNoTime(%q) claimed a time", bad)
		}
	}
}

// TestRequestAndOrderNumbersFollowTheDocumentedLayout checks the numbers
// against the README's rule ("Numbers"), computed by hand here: at
// 2026-03-01 12:00:00.123 UTC, 790 days and 12 h after 2024-01-01, the
// milliseconds are 68,299,200,123; node 5 puts 5<<12 beside them, and the
// sequence counts within the millisecond. The activity and the SKU lead,
// joined by dashes.
func TestRequestAndOrderNumbersFollowTheDocumentedLayout(t *testing.T) {
	g := NewRequestNos(5)
	g.now = func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 123e6, time.UTC) }
	for i, id := range []string{"286467608272719872", "286467608272719873", "286467608272719874"} {
		want := "7-7001-" + id
		rn := g.Next(7, 7001)
		if rn != want {
			t.Errorf("ticket %d at a frozen clock: %s, want %s", i, rn, want)
		}
		if o := OrderNo(rn); o != "O"+want {
			t.Errorf("order of ticket %s: %s, want O%s", rn, o, want)
		}
	}
	// A number of today's clock has the documented form.
	orderNo := regexp.MustCompile(`^O[1-9][0-9]{0,18}-[1-9][0-9]{0,18}-[1-9][0-9]{0,18}$`)
	if rn := NewRequestNos(1023).Next(1<<62, 1<<62); !orderNo.MatchString(OrderNo(rn)) || len(rn) > MaxRequestNoLen {
		t.Errorf("order of a ticket issued now: %q", OrderNo(rn))
	}
}

func TestParseRequestNoReadsOnlyTheOneSpelling(t *testing.T) {
	g := NewRequestNos(3)
	rn := g.Next(12, 345)
	a, k, id, ok := ParseRequestNo(rn)
	if !ok || a != 12 || k != 345 || !strings.HasSuffix(rn, "-"+id) {
		t.Fatalf("ParseRequestNo(%s) = %d %d %q %v", rn, a, k, id, ok)
	}
	if a, k, id, ok := ParseRequestNo("9223372036854775807-1-2"); !ok || a != 1<<63-1 || k != 1 || id != "2" {
		t.Errorf("the largest activity: %d %d %q %v", a, k, id, ok)
	}
	for _, bad := range []string{
		"", "385465232614494208", "7-7001", "7-7001-", "-7001-1", "7--1", "07-7001-1", "7-07001-1",
		"7-7001-01", "7-7001-1-2", "+7-7001-1", "7-7001-1a", "7-7001- 1", "9223372036854775808-1-1",
		"0-1-1", "1-0-1", "1-1-0", strings.Repeat("1", 20) + "-1-1",
	} {
		if _, _, _, ok := ParseRequestNo(bad); ok {
			t.Errorf("ParseRequestNo(%q) read it", bad)
		}
	}
}

func TestResultsKeyIsInTheSKUsSlot(t *testing.T) {
	if got, want := ResultsKey(7, 7001), "sk:{a7:s7001}:r"; got != want {
		t.Errorf("ResultsKey: %s, want %s", got, want)
	}
	if got, want := RateKey(7, 7001, 42), "sk:{a7:s7001}:rl:42"; got != want {
		t.Errorf("RateKey: %s, want %s", got, want)
	}
}

// FuzzParseRequestNo: the result route hands ParseRequestNo whatever a
// client puts in the path. It never panics, and what it reads is the one
// spelling of a ticket: the three numbers written back give the input.
func FuzzParseRequestNo(f *testing.F) {
	for _, s := range []string{"7-7001-385465232614494208", "1-1-1", "9223372036854775807-9223372036854775807-9223372036854775807",
		"385465232614494208", "07-1-1", "1--1", "-1-1", "1-1-", "1-1-1-1", "9223372036854775808-1-1", "a-b-c", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rn string) {
		a, k, id, ok := ParseRequestNo(rn)
		if !ok {
			if a != 0 || k != 0 || id != "" {
				t.Fatalf("ParseRequestNo(%q) refused but gave %d %d %q", rn, a, k, id)
			}
			return
		}
		if a <= 0 || k <= 0 {
			t.Fatalf("ParseRequestNo(%q) = %d %d", rn, a, k)
		}
		_, _, b, _, _ := ParseTicket(rn)
		skuPart := strconv.FormatInt(k, 10)
		if b != NoBucket { // "<activity>-<sku>.<bucket>-<id>"
			skuPart += "." + strconv.Itoa(b)
		}
		if back := strconv.FormatInt(a, 10) + "-" + skuPart + "-" + id; back != rn {
			t.Fatalf("ParseRequestNo(%q) reads back as %q", rn, back)
		}
		if _, ok := RequestNoTime(rn); !ok {
			t.Fatalf("RequestNoTime(%q) refused a ticket number ParseRequestNo read", rn)
		}
	})
}

// TestResultValueRoundTrips: what AppendResultValue writes (and the occupy
// script's QUEUING form, "QUEUING|<owner>||") ParseResultValue reads back;
// anything else is refused.
func TestResultValueRoundTrips(t *testing.T) {
	for _, c := range []struct {
		state         string
		owner         int64
		orderNo, code string
	}{
		{ResultQueuing, 42, "", ""},
		{ResultSuccess, 7, "O7-7001-385465232614494208", ""},
		{ResultFail, 9, "", FailReleased},
		{ResultFail, 9, "O7-7001-1", FailClosed},
	} {
		v := string(AppendResultValue(nil, c.state, c.owner, c.orderNo, c.code))
		st, o, on, code, ok := ParseResultValue(v)
		if !ok || st != c.state || o != c.owner || on != c.orderNo || code != c.code {
			t.Errorf("%q read back as %q %d %q %q %v", v, st, o, on, code, ok)
		}
	}
	if st, o, _, _, ok := ParseResultValue("QUEUING|42||"); !ok || st != ResultQueuing || o != 42 {
		t.Errorf("the occupy script's QUEUING value: %q %d %v", st, o, ok)
	}
	for _, bad := range []string{"", "QUEUING", "QUEUING|42", "QUEUING|42|", "|42||", "QUEUING|x||", "FAIL|1||A|B"} {
		if _, _, _, _, ok := ParseResultValue(bad); ok {
			t.Errorf("ParseResultValue(%q) read it", bad)
		}
	}
}
