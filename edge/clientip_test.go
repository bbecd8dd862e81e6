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

func TestClientAddress(t *testing.T) {
	trusted := []string{"10.0.0.0/8", "2001:db8:ffff::/48"}
	cases := []struct {
		name    string
		trusted []string
		peer    string
		xff     []string // header lines
		want    string   // "" : no address
	}{
		{"the peer without proxies configured", nil, "192.0.2.1", nil, "192.0.2.1"},
		{"X-Forwarded-For is ignored when no proxy is trusted", nil, "10.0.0.5", []string{"192.0.2.66"}, "10.0.0.5"},
		{"X-Forwarded-For is ignored from an untrusted peer", trusted, "172.16.0.1", []string{"192.0.2.66"}, "172.16.0.1"},
		{"a trusted proxy's client", trusted, "10.0.0.5", []string{"192.0.2.66"}, "192.0.2.66"},
		{"trusted hops are skipped from the right", trusted, "10.0.0.5", []string{"192.0.2.66, 10.0.0.9,10.1.1.1"}, "192.0.2.66"},
		{"what the client wrote left of it is not believed", trusted, "10.0.0.5", []string{"192.0.2.66, 198.51.100.1"}, "198.51.100.1"},
		{"several header lines read as one list", trusted, "10.0.0.5", []string{"192.0.2.66", "10.0.0.9"}, "192.0.2.66"},
		{"the last line is the latest hop", trusted, "10.0.0.5", []string{"10.0.0.9", "192.0.2.66"}, "192.0.2.66"},
		{"garbage left of the client does not matter", trusted, "10.0.0.5", []string{"garbage, 192.0.2.66"}, "192.0.2.66"},
		{"garbage right of every client stops at the last trusted hop", trusted, "10.0.0.5", []string{"192.0.2.66, junk"}, "10.0.0.5"},
		{"an empty header is the peer", trusted, "10.0.0.5", []string{""}, "10.0.0.5"},
		{"every hop trusted: the left-most", trusted, "10.0.0.5", []string{"10.9.9.9, 10.0.0.9"}, "10.9.9.9"},
		{"IPv6 through an IPv6 proxy", trusted, "2001:db8:ffff::1", []string{"2001:db8:1::7"}, "2001:db8:1::7"},
		{"an IPv4-mapped client is IPv4", trusted, "10.0.0.5", []string{"::ffff:192.0.2.66"}, "192.0.2.66"},
		{"a port appended by a proxy is dropped", trusted, "10.0.0.5", []string{"192.0.2.66:5123"}, "192.0.2.66"},
		{"a bracketed IPv6 with a port", trusted, "10.0.0.5", []string{"[2001:db8:1::7]:443"}, "2001:db8:1::7"},
		{"a zone is not an address", trusted, "10.0.0.5", []string{"fe80::1%eth0"}, "10.0.0.5"},
		{"leading zeros are not an address", trusted, "10.0.0.5", []string{"192.0.2.066"}, "10.0.0.5"},
		{"an IPv4-mapped peer is IPv4", trusted, "::ffff:10.0.0.5", []string{"192.0.2.66"}, "192.0.2.66"},
		{"no IP peer: no address", trusted, "", []string{"192.0.2.66"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := &admission{}
			a.trusted, _ = parsePrefixes("test", c.trusted)
			var ctx fasthttp.RequestCtx
			var req fasthttp.Request
			for _, h := range c.xff {
				req.Header.Add("X-Forwarded-For", h)
			}
			ctx.Init(&req, nil, nil)
			if c.peer != "" {
				ctx.SetRemoteAddr(&net.TCPAddr{IP: net.ParseIP(c.peer), Port: 1234})
			}
			got := a.clientIP(&ctx)
			if c.want == "" {
				if got.IsValid() {
					t.Fatalf("got %v, want no address", got)
				}
				return
			}
			if got != netip.MustParseAddr(c.want) {
				t.Fatalf("got %v, want %s", got, c.want)
			}
		})
	}
}
