package edge

import (
	"strings"
	"testing"
	"time"

	"seckill/internal/identity"
)

var (
	gwNew = identity.Key{ID: "g2", Secret: strings.Repeat("n", 32)}
	gwOld = identity.Key{ID: "g1", Secret: strings.Repeat("o", 32)}
)

// An edge under identity trusted_proxies believes X-User-Id only from the
// gateway's address: a foreign peer is 401 on every route that reads it,
// X-Forwarded-For naming the gateway changes nothing.
func TestIdentityTrustedProxies(t *testing.T) {
	e := newEdge(t, withConfig(func(c *Config) {
		c.Identity = identity.ModeTrustedProxies
		c.TrustedProxies = []string{"10.9.0.0/16"}
	}))
	gw, foreign := e.from("10.9.0.5"), e.from("198.51.100.7")
	if r := e.doVia(gw, "POST", "/api/v1/flash-sale/order", "42", `{"skuId":1001}`); r.status != 200 {
		t.Fatalf("from the gateway: %d %s", r.status, r.raw)
	}
	for _, rt := range []struct{ method, path, body string }{
		{"POST", "/api/v1/flash-sale/order", `{"skuId":1001}`},
		{"POST", "/api/seckill/submit", `{"activityId":7,"skuId":1001}`},
		{"POST", "/api/v1/flash-sale/token", `{"activityId":8,"skuId":2001}`},
		{"GET", "/api/v1/flash-sale/result/123", ""},
	} {
		r := e.doVia(foreign, rt.method, rt.path, "42", rt.body, "X-Forwarded-For", "10.9.0.5")
		if r.status != 401 || r.code() != "UNAUTHORIZED" {
			t.Errorf("%s %s from a foreign peer: %d %s, want 401", rt.method, rt.path, r.status, r.raw)
		}
	}
	if r := e.doVia(gw, "POST", "/api/v1/flash-sale/order", "42", `{"skuId":1001}`, "X-User-Id", "43"); r.status != 400 {
		t.Fatalf("doubled X-User-Id from the gateway: %d %s, want 400", r.status, r.raw)
	}
}

// Under identity signed the signature decides, not the peer: good (new or
// old key) passes; stale, forged, unknown key or none is 401; a doubled
// header 400.
func TestIdentitySigned(t *testing.T) {
	e := newEdge(t, withConfig(func(c *Config) {
		c.Identity = identity.ModeSigned
		c.IdentityKeys = []identity.Key{gwNew, gwOld}
		c.IdentitySkew = 30 * time.Second
	}))
	send := func(k identity.Key, user int64, at time.Time, extra ...string) response {
		ts, sig := identity.Sign(k, user, at)
		h := append([]string{"X-User-Ts", ts, "X-User-Sig", sig}, extra...)
		return e.doVia(e.client, "POST", "/api/v1/flash-sale/order", "42", `{"skuId":1001}`, h...)
	}
	now := time.Now()
	for _, c := range []struct {
		name   string
		r      response
		status int
	}{
		{"good", send(gwNew, 42, now), 200},
		{"rotated: the old key verifies", send(gwOld, 42, now), 200},
		{"stale", send(gwNew, 42, now.Add(-time.Minute)), 401},
		{"forged", send(identity.Key{ID: "g2", Secret: strings.Repeat("x", 32)}, 42, now), 401},
		{"unknown key", send(identity.Key{ID: "g9", Secret: gwNew.Secret}, 42, now), 401},
		{"another user's signature", send(gwNew, 43, now), 401},
		{"unsigned", e.order("42", `{"skuId":1001}`), 401},
		{"doubled", send(gwNew, 42, now, "X-User-Id", "42"), 400},
	} {
		if c.r.status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, c.r.status, c.r.raw, c.status)
		}
	}
}

func TestIdentityConfig(t *testing.T) {
	c := DefaultConfig()
	if c.Identity == identity.ModeAny {
		t.Fatal("the production default must not believe any peer")
	}
	if err := c.CheckIdentity(); err == nil || !strings.Contains(err.Error(), "edge.identity_keys") {
		t.Fatalf("signed without keys: %v, want an error naming edge.identity_keys", err)
	}
	c.IdentityKeys = []identity.Key{gwNew}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckIdentity(); err != nil {
		t.Fatal(err)
	}
	c.Identity = identity.ModeTrustedProxies
	if err := c.CheckIdentity(); err == nil || !strings.Contains(err.Error(), "edge.trusted_proxies") {
		t.Fatalf("trusted_proxies without proxies: %v", err)
	}
}
