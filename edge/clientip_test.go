package edge

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// FuzzParseAddr feeds X-Forwarded-For entries (untrusted input) to the
// address parser: it must never panic, accept only what netip accepts
// (after dropping a port), and never yield an IPv4-mapped address.
func FuzzParseAddr(f *testing.F) {
	for _, s := range []string{"203.0.113.7", "::ffff:10.0.0.1", "[2001:db8::1]:443", "192.0.2.1:80", "01.2.3.4", "fe80::1%eth0", "1.2.3.4.5", "[::1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, ok := parseAddr(b)
		s := string(b)
		want, err := netip.ParseAddr(s)
		switch {
		case strings.HasPrefix(s, "["):
			if end := strings.IndexByte(s, ']'); end > 0 {
				want, err = netip.ParseAddr(s[1:end])
			}
		case strings.Count(s, ":") == 1:
			want, err = netip.ParseAddr(s[:strings.IndexByte(s, ':')])
		}
		if !ok {
			return
		}
		if !a.IsValid() || a.Is4In6() || a.Zone() != "" {
			t.Fatalf("%q gave %v", s, a)
		}
		if err != nil || want.Unmap() != a {
			t.Fatalf("%q gave %v; netip says %v, %v", s, a, want, err)
		}
	})
}

// BenchmarkClientIPForwarded is the client address of a request from a
// trusted proxy: header walk and parse, no allocation.
func BenchmarkClientIPForwarded(b *testing.B) {
	e := newEdge(b, admitting())
	var req fasthttp.Request
	req.Header.Set("X-Forwarded-For", "198.51.100.1, 203.0.113.7")
	req.Header.Add("X-Forwarded-For", "10.0.0.9")
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, nil, nil)
	ctx.SetRemoteAddr(&net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 40000})
	if got := e.srv.admit.clientIP(&ctx); got != netip.MustParseAddr("203.0.113.7") {
		b.Fatalf("client %v", got)
	}
	b.ReportAllocs()
	for b.Loop() {
		if !e.srv.admit.clientIP(&ctx).IsValid() {
			b.Fatal("no address")
		}
	}
}
