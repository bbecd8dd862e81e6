package web

import (
	"net"
	"net/netip"
	"testing"

	"github.com/valyala/fasthttp"

	"seckill/internal/identity"
)

// The result stream and my orders run the edge's identity check: under
// trusted_proxies a foreign peer is 401, a doubled X-User-Id 400, before
// any read.
func TestBuyerRoutesRunTheIdentityCheck(t *testing.T) {
	v, err := identity.New(identity.Config{Mode: identity.ModeTrustedProxies, Trusted: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	routes := map[string]fasthttp.RequestHandler{
		"result events": (&ResultEvents{Identity: v}).Handle, // no results: a read would panic
		"my orders":     NewOrders(nil, OrdersConfig{Identity: v}).Handle,
	}
	for name, h := range routes {
		for _, c := range []struct {
			peer   string
			users  []string
			status int
		}{
			{"198.51.100.7", []string{"42"}, 401},
			{"10.9.0.5", []string{"42", "43"}, 400},
			{"10.9.0.5", nil, 401},
		} {
			var req fasthttp.Request
			req.SetRequestURI("/x")
			for _, u := range c.users {
				req.Header.Add("X-User-Id", u)
			}
			ctx := &fasthttp.RequestCtx{}
			ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(c.peer), Port: 4000}, nil)
			ctx.SetUserValue("requestNo", "123")
			h(ctx)
			if ctx.Response.StatusCode() != c.status {
				t.Errorf("%s from %s users %v: %d %s, want %d", name, c.peer, c.users, ctx.Response.StatusCode(), ctx.Response.Body(), c.status)
			}
		}
	}
}
