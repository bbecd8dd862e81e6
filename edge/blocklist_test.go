package edge

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"seckill/blocklist"
	"seckill/internal/testenv"
)

func TestBlocklistFromConfigAndRedis(t *testing.T) {
	e := newEdge(t, withConfig(func(c *Config) {
		c.Blocklist.IPs = []string{"203.0.113.0/24"}
		c.Blocklist.Users = []int64{666}
		c.Blocklist.RefreshInterval = 200 * time.Millisecond
	}))
	e.waitSubscribed()
	bad := e.from("203.0.113.9")
	mustStatus(t, e.doVia(bad, "POST", orderPath, "5", `{"skuId":1001}`), 403, "BLOCKED")
	mustStatus(t, e.doVia(bad, "GET", "/api/v1/flash-sale/activities/7", "", ""), 403, "BLOCKED")
	mustStatus(t, e.doVia(bad, "GET", "/readyz", "", ""), 200, "OK")
	mustStatus(t, e.order("666", `{"skuId":1001}`), 403, "BLOCKED")
	mustStatus(t, e.do("POST", "/api/v1/flash-sale/token", "666", `{"skuId":2001}`), 403, "BLOCKED")
	mustStatus(t, e.order("5", `{"skuId":1001}`), 200, "QUEUING")
	if e.eng.calls.Load() != 1 {
		t.Fatal("a blocked request reached the engine")
	}

	// The admin API's store: a change is announced and applied at once.
	st := blocklist.NewStore(e.rdb)
	ctx := context.Background()
	if _, err := st.AddUser(ctx, 777); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.AddIP(ctx, "198.51.100.7"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "user 777 and 198.51.100.7 blocked", func() bool {
		return e.srv.admit.block.set().User(777) && e.srv.admit.block.set().IP(netip.MustParseAddr("198.51.100.7"))
	})
	mustStatus(t, e.order("777", `{"skuId":1001}`), 403, "BLOCKED")
	mustStatus(t, e.doVia(e.from("198.51.100.7"), "POST", orderPath, "8", `{"skuId":1001}`), 403, "BLOCKED")
	if ips, users := testenv.Metric(t, e.reg, "seckill_edge_blocklist_entries", map[string]string{"kind": "ip"}), testenv.Metric(t, e.reg, "seckill_edge_blocklist_entries", map[string]string{"kind": "user"}); ips != 2 || users != 2 {
		t.Errorf("blocklist gauges ip=%v user=%v, want 2 and 2", ips, users)
	}
	if _, err := st.RemoveUser(ctx, 777); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.RemoveIP(ctx, "198.51.100.7"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the blocks to lift", func() bool {
		return !e.srv.admit.block.set().User(777) && !e.srv.admit.block.set().IP(netip.MustParseAddr("198.51.100.7"))
	})
	mustStatus(t, e.order("777", `{"skuId":1001}`), 200, "QUEUING")
	// The configured entries stay whatever Redis holds.
	mustStatus(t, e.order("666", `{"skuId":1001}`), 403, "BLOCKED")

	// An entry whose event was missed arrives with the periodic refresh.
	e.redis.Do(t, "SADD", blocklist.UsersKey, "888")
	waitFor(t, "the refresh to pick up user 888", func() bool { return e.srv.admit.block.set().User(888) })

	// Redis down: the last list stays in force.
	e.redis.Stop()
	t.Cleanup(func() { _ = e.redis.Start() })
	time.Sleep(500 * time.Millisecond)
	mustStatus(t, e.order("888", `{"skuId":1001}`), 403, "BLOCKED")
}

func TestANewEdgeStartsWithTheBlocklist(t *testing.T) {
	e := newEdge(t)
	if _, err := blocklist.NewStore(e.rdb).AddUser(context.Background(), 4242); err != nil {
		t.Fatal(err)
	}
	f := newEdge(t, withRedis(e.redis))
	mustStatus(t, f.order("4242", `{"skuId":1001}`), 403, "BLOCKED")
}
