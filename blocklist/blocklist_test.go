package blocklist

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"seckill/internal/testenv"
	"seckill/sale"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestParseIPCanonicalises(t *testing.T) {
	cases := []struct{ in, want string }{
		{"203.0.113.7", "203.0.113.7"},
		{"::ffff:203.0.113.7", "203.0.113.7"},
		{"2001:DB8::1", "2001:db8::1"},
		{"10.1.2.3/8", "10.0.0.0/8"},
		{"203.0.113.7/32", "203.0.113.7"},
		{"::ffff:10.0.0.0/104", "10.0.0.0/8"},
		{"2001:db8::/32", "2001:db8::/32"},
		{"2001:db8::1/128", "2001:db8::1"},
	}
	for _, c := range cases {
		got, err := ParseIP(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseIP(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "localhost", "1.2.3", "1.2.3.4/33", "fe80::1%eth0", "1.2.3.4 "} {
		if _, err := ParseIP(bad); !errors.Is(err, ErrBadEntry) {
			t.Errorf("ParseIP(%q): %v, want ErrBadEntry", bad, err)
		}
	}
}

func TestSetMatchesAddressesPrefixesAndUsers(t *testing.T) {
	s, err := NewSet([]string{"203.0.113.7", "10.0.0.0/8", "2001:db8::/32"}, []int64{42})
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]bool{
		"203.0.113.7": true, "203.0.113.8": false, "10.200.1.1": true, "11.0.0.1": false,
		"2001:db8:1::5": true, "2001:db9::1": false,
	} {
		if got := s.IP(netip.MustParseAddr(addr)); got != want {
			t.Errorf("IP(%s) = %v, want %v", addr, got, want)
		}
	}
	if !s.User(42) || s.User(43) {
		t.Error("user lookup wrong")
	}
	var none *Set
	if none.IP(netip.MustParseAddr("1.1.1.1")) || none.User(1) || !none.Empty() {
		t.Error("a nil set must block nothing")
	}
	if _, err := NewSet(nil, []int64{0}); err == nil {
		t.Error("user 0 must be refused")
	}
	u := s.Union(mustSet(t, []string{"198.51.100.1"}, []int64{7}))
	if !u.IP(netip.MustParseAddr("198.51.100.1")) || !u.IP(netip.MustParseAddr("203.0.113.7")) || !u.User(7) || !u.User(42) {
		t.Error("union lost entries")
	}
}

func mustSet(t *testing.T, ips []string, users []int64) *Set {
	t.Helper()
	s, err := NewSet(ips, users)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStoreRoundTripAndAnnounces(t *testing.T) {
	r := testenv.StartRedis(t)
	rdb := r.Client(t)
	st := NewStore(rdb)
	ctx := context.Background()

	events := make(chan string, 16)
	sub, cancel := context.WithCancel(ctx)
	defer cancel()
	ready := make(chan struct{})
	var once sync.Once
	go func() {
		hctx := rueidis.WithOnSubscriptionHook(sub, func(rueidis.PubSubSubscription) { once.Do(func() { close(ready) }) })
		_ = rdb.Receive(hctx, rdb.B().Subscribe().Channel(sale.EventsChannel).Build(), func(m rueidis.PubSubMessage) {
			events <- m.Message
		})
	}()
	<-ready

	if c, added, err := st.AddIP(ctx, "::ffff:203.0.113.7"); err != nil || !added || c != "203.0.113.7" {
		t.Fatalf("AddIP: %q %v %v", c, added, err)
	}
	if _, added, _ := st.AddIP(ctx, "203.0.113.7"); added {
		t.Fatal("adding twice reported a new entry")
	}
	if added, err := st.AddUser(ctx, 42); err != nil || !added {
		t.Fatalf("AddUser: %v %v", added, err)
	}
	if _, _, err := st.AddIP(ctx, "nope"); !errors.Is(err, ErrBadEntry) {
		t.Fatalf("AddIP(nope): %v", err)
	}
	select {
	case m := <-events:
		e, err := sale.ParseEvent(m)
		if err != nil || e.Kind != sale.EventBlocklist || e.At == 0 {
			t.Fatalf("event %q: %+v %v", m, e, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no blocklist event")
	}

	// An entry written into Redis by hand that does not parse is skipped.
	r.Do(t, "SADD", IPsKey, "bogus")
	s, bad, err := st.Load(ctx)
	if err != nil || len(bad) != 1 || !s.IP(netip.MustParseAddr("203.0.113.7")) || !s.User(42) {
		t.Fatalf("Load: %v bad=%v err=%v", s.IPs(), bad, err)
	}
	if _, removed, err := st.RemoveIP(ctx, "203.0.113.7/32"); err != nil || !removed {
		t.Fatalf("RemoveIP: %v %v", removed, err)
	}
	if removed, err := st.RemoveUser(ctx, 42); err != nil || !removed {
		t.Fatalf("RemoveUser: %v %v", removed, err)
	}
	if removed, _ := st.RemoveUser(ctx, 42); removed {
		t.Fatal("removing twice reported a removal")
	}
	s, _, _ = st.Load(ctx)
	if s.IP(netip.MustParseAddr("203.0.113.7")) || s.User(42) {
		t.Fatal("entries survived removal")
	}
}

func TestStoreFailsWhenRedisIsDown(t *testing.T) {
	r := testenv.StartRedis(t)
	st := NewStore(r.Client(t))
	r.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, _, err := st.AddIP(ctx, "203.0.113.7"); err == nil {
		t.Fatal("AddIP with Redis down must fail")
	}
	if _, _, err := st.Load(ctx); err == nil {
		t.Fatal("Load with Redis down must fail")
	}
}
