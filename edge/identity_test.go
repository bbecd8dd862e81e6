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
		c.IdentitySkew = 5 * time.Second
	}))
	send := func(k identity.Key, user int64, at time.Time, extra ...string) response {
		ts, sig := identity.Sign(k, "POST", "/api/v1/flash-sale/order", []byte(`{"skuId":1001}`), user, at)
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

// Through the edge, a signed order's headers are good for that order
// only: on the submit or result route, or under another body, 401 — and
// the order they sign is not placed twice by a replay on another route.
func TestASignedHeaderIsForItsOneRequest(t *testing.T) {
	e := newEdge(t, withConfig(func(c *Config) {
		c.Identity = identity.ModeSigned
		c.IdentityKeys = []identity.Key{gwNew}
		c.IdentitySkew = 5 * time.Second
	}))
	body := `{"skuId":1001}`
	ts, sig := identity.Sign(gwNew, "POST", "/api/v1/flash-sale/order", []byte(body), 42, time.Now())
	h := []string{"X-User-Ts", ts, "X-User-Sig", sig}
	for _, rt := range []struct{ name, method, path, body string }{
		{"the submit route", "POST", "/api/seckill/submit", `{"activityId":7,"skuId":1001}`},
		{"the token route", "POST", "/api/v1/flash-sale/token", `{"activityId":8,"skuId":2001}`},
		{"the result route", "GET", "/api/v1/flash-sale/result/123", ""},
		{"the order route with another SKU", "POST", "/api/v1/flash-sale/order", `{"skuId":1002}`},
	} {
		if r := e.doVia(e.client, rt.method, rt.path, "42", rt.body, h...); r.status != 401 {
			t.Errorf("%s under the order's headers: %d %s, want 401", rt.name, r.status, r.raw)
		}
	}
	if r := e.doVia(e.client, "POST", "/api/v1/flash-sale/order", "42", body, h...); r.status != 200 {
		t.Fatalf("the signed order itself: %d %s", r.status, r.raw)
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
	c.Identity = identity.ModeAny
	if err := c.CheckIdentity(); err == nil || !strings.Contains(err.Error(), "edge.identity_insecure") {
		t.Fatalf("identity any at an edge's start: %v, want a refusal naming edge.identity_insecure", err)
	}
	c.IdentityInsecure = true
	if err := c.CheckIdentity(); err != nil {
		t.Fatalf("identity any, meant: %v", err)
	}
}
