package identity

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

var (
	k1 = Key{ID: "g1", Secret: strings.Repeat("a", 32)}
	k2 = Key{ID: "g2", Secret: strings.Repeat("b", 32)}
	t0 = time.Unix(1_800_000_000, 0)
)

// reqCtx builds a request from peer carrying headers (a key may repeat).
func reqCtx(peer string, headers ...[2]string) *fasthttp.RequestCtx {
	var req fasthttp.Request
	req.SetRequestURI("/api/v1/flash-sale/order")
	for _, h := range headers {
		req.Header.Add(h[0], h[1])
	}
	ctx := &fasthttp.RequestCtx{}
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(peer), Port: 40000}, nil)
	return ctx
}

func signedHeaders(k Key, user int64, at time.Time) [][2]string {
	ts, sig := Sign(k, user, at)
	return [][2]string{{HeaderUser, strconv.FormatInt(user, 10)}, {HeaderTs, ts}, {HeaderSig, sig}}
}

func mustNew(t testing.TB, c Config) *Verifier {
	t.Helper()
	v, err := New(c, func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestAnyAndDoubled(t *testing.T) {
	v := mustNew(t, Config{Mode: ModeAny})
	cases := []struct {
		name    string
		headers [][2]string
		want    Result
		user    int64
	}{
		{"ok", [][2]string{{HeaderUser, "42"}}, OK, 42},
		{"missing", nil, Missing, 0},
		{"empty", [][2]string{{HeaderUser, ""}}, Missing, 0},
		{"plus sign", [][2]string{{HeaderUser, "+42"}}, Malformed, 0},
		{"zero", [][2]string{{HeaderUser, "0"}}, Malformed, 0},
		{"doubled", [][2]string{{HeaderUser, "42"}, {HeaderUser, "43"}}, Doubled, 0},
		{"doubled other case", [][2]string{{HeaderUser, "42"}, {"x-user-id", "43"}}, Doubled, 0},
	}
	for _, c := range cases {
		user, got := v.User(reqCtx("203.0.113.9", c.headers...))
		if got != c.want || user != c.user {
			t.Errorf("%s: got (%d, %d), want (%d, %d)", c.name, user, got, c.user, c.want)
		}
	}
	if Doubled.Status() != 400 || Malformed.Status() != 400 || Missing.Status() != 401 || Untrusted.Status() != 401 || BadSig.Status() != 401 {
		t.Fatal("statuses")
	}
}

func TestTrustedProxies(t *testing.T) {
	v := mustNew(t, Config{Mode: ModeTrustedProxies, Trusted: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}})
	if u, r := v.User(reqCtx("10.1.2.3", [2]string{HeaderUser, "7"})); r != OK || u != 7 {
		t.Fatalf("trusted peer: (%d, %d)", u, r)
	}
	if _, r := v.User(reqCtx("::ffff:10.1.2.3", [2]string{HeaderUser, "7"})); r != OK {
		t.Fatalf("trusted peer, v4-mapped: %d", r)
	}
	// X-Forwarded-For never makes a peer trusted.
	if _, r := v.User(reqCtx("198.51.100.4", [2]string{HeaderUser, "7"}, [2]string{"X-Forwarded-For", "10.1.2.3"})); r != Untrusted {
		t.Fatalf("foreign peer: %d, want Untrusted", r)
	}
	if _, r := v.User(reqCtx("10.1.2.3", [2]string{HeaderUser, "7"}, [2]string{HeaderUser, "8"})); r != Doubled {
		t.Fatalf("doubled from the proxy: %d", r)
	}
	if err := (&Config{Mode: ModeTrustedProxies}).Check(); err == nil {
		t.Fatal("trusted_proxies without proxies passed Check")
	}
}

func TestSigned(t *testing.T) {
	// g2 is the new key (signs), g1 the old one (still verifies).
	v := mustNew(t, Config{Mode: ModeSigned, Keys: []Key{k2, k1}, Skew: 30 * time.Second})
	check := func(name string, want Result, h ...[2]string) {
		t.Helper()
		if _, r := v.User(reqCtx("198.51.100.4", h...)); r != want {
			t.Errorf("%s: %d, want %d", name, r, want)
		}
	}
	check("good, new key", OK, signedHeaders(k2, 42, t0)...)
	check("rotated: old key still verifies", OK, signedHeaders(k1, 42, t0.Add(-20*time.Second))...)
	check("inside the window ahead", OK, signedHeaders(k2, 42, t0.Add(30*time.Second))...)
	check("stale", BadSig, signedHeaders(k2, 42, t0.Add(-31*time.Second))...)
	check("future", BadSig, signedHeaders(k2, 42, t0.Add(31*time.Second))...)
	unknown := Key{ID: "g3", Secret: k2.Secret}
	check("unknown key id", BadSig, signedHeaders(unknown, 42, t0)...)
	forged := Key{ID: "g2", Secret: strings.Repeat("c", 32)}
	check("forged (wrong secret)", BadSig, signedHeaders(forged, 42, t0)...)
	h := signedHeaders(k2, 42, t0)
	h[0][1] = "43"
	check("other user under 42's signature", BadSig, h...)
	h = signedHeaders(k2, 42, t0)
	check("no signature", BadSig, h[0], h[1])
	check("no timestamp", BadSig, h[0], h[2])
	check("unsigned", BadSig, h[0])
	check("missing user", Missing, h[1], h[2])
	h = signedHeaders(k2, 42, t0)
	h[2][1] = h[2][1][:len(h[2][1])-2] + "zz"
	check("not hex", BadSig, h...)
	check("doubled", Doubled, append(signedHeaders(k2, 42, t0), [2]string{HeaderUser, "42"})...)

	// A rotation that dropped g1: its signatures stop verifying.
	v = mustNew(t, Config{Mode: ModeSigned, Keys: []Key{k2}, Skew: 30 * time.Second})
	if _, r := v.User(reqCtx("198.51.100.4", signedHeaders(k1, 42, t0)...)); r != BadSig {
		t.Fatalf("retired key: %d", r)
	}
}

func TestValidate(t *testing.T) {
	bad := []Config{
		{Mode: ""},
		{Mode: "trust_me"},
		{Mode: ModeSigned, Skew: time.Second},
		{Mode: ModeSigned, Keys: []Key{{ID: "g1", Secret: "short"}}, Skew: time.Second},
		{Mode: ModeSigned, Keys: []Key{k1, k1}, Skew: time.Second},
		{Mode: ModeSigned, Keys: []Key{k1}},
	}
	for i, c := range bad {
		if err := c.Check(); err == nil {
			t.Errorf("case %d checked", i)
		} else if strings.Contains(err.Error(), k1.Secret) {
			t.Errorf("case %d shows the secret", i)
		}
	}
	// The shape alone: a mode that lacks its keys or proxies validates (a
	// process without an edge needs neither) but does not pass Check.
	for _, c := range []Config{{Mode: ModeSigned, Skew: time.Second}, {Mode: ModeTrustedProxies}} {
		if err := c.Validate(); err != nil {
			t.Errorf("%s without its keys or proxies: the shape is fine, got %v", c.Mode, err)
		}
		if err := c.Check(); err == nil {
			t.Errorf("%s without its keys or proxies passed Check", c.Mode)
		}
	}
	var k Key
	if err := k.UnmarshalText([]byte("g9:" + k1.Secret)); err != nil || k.ID != "g9" || k.Secret != k1.Secret {
		t.Fatalf("UnmarshalText: %+v %v", k, err)
	}
}

func BenchmarkSigned(b *testing.B) {
	v := mustNew(b, Config{Mode: ModeSigned, Keys: []Key{k2, k1}, Skew: 30 * time.Second})
	ctx := reqCtx("198.51.100.4", signedHeaders(k1, 42, t0)...) // the second key: the key search too
	b.ReportAllocs()
	for b.Loop() {
		if _, r := v.User(ctx); r != OK {
			b.Fatal(r)
		}
	}
}
