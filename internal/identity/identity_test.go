package identity

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
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

// The request the signing tests sign and send unless they say otherwise.
const (
	orderMethod = "POST"
	orderTarget = "/api/v1/flash-sale/order"
	orderBody   = `{"skuId":1001}`
)

// reqCtx builds the order request from peer carrying headers (a key may
// repeat).
func reqCtx(peer string, headers ...[2]string) *fasthttp.RequestCtx {
	return sendCtx(peer, orderMethod, orderTarget, orderBody, headers...)
}

// sendCtx builds a request method target with body from peer carrying
// headers.
func sendCtx(peer, method, target, body string, headers ...[2]string) *fasthttp.RequestCtx {
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(target)
	if body != "" {
		req.SetBodyString(body)
	}
	for _, h := range headers {
		req.Header.Add(h[0], h[1])
	}
	ctx := &fasthttp.RequestCtx{}
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(peer), Port: 40000}, nil)
	return ctx
}

// signedHeaders signs the order request.
func signedHeaders(k Key, user int64, at time.Time) [][2]string {
	return signedFor(k, orderMethod, orderTarget, orderBody, user, at)
}

func signedFor(k Key, method, target, body string, user int64, at time.Time) [][2]string {
	ts, sig := Sign(k, method, target, []byte(body), user, at)
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
	v := mustNew(t, Config{Mode: ModeSigned, Keys: []Key{k2, k1}, Skew: 5 * time.Second})
	check := func(name string, want Result, h ...[2]string) {
		t.Helper()
		if _, r := v.User(reqCtx("198.51.100.4", h...)); r != want {
			t.Errorf("%s: %d, want %d", name, r, want)
		}
	}
	check("good, new key", OK, signedHeaders(k2, 42, t0)...)
	check("rotated: old key still verifies", OK, signedHeaders(k1, 42, t0.Add(-4*time.Second))...)
	check("at the end of the window", OK, signedHeaders(k2, 42, t0.Add(-5*time.Second))...)
	check("a clock a little ahead", OK, signedHeaders(k2, 42, t0.Add(FutureSkew))...)
	check("stale", BadSig, signedHeaders(k2, 42, t0.Add(-6*time.Second))...)
	check("future", BadSig, signedHeaders(k2, 42, t0.Add(FutureSkew+time.Second))...)
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
	v = mustNew(t, Config{Mode: ModeSigned, Keys: []Key{k2}, Skew: 5 * time.Second})
	if _, r := v.User(reqCtx("198.51.100.4", signedHeaders(k1, 42, t0)...)); r != BadSig {
		t.Fatalf("retired key: %d", r)
	}
}

// A signature is for one request: the same headers on another method,
// route, query or body are refused.
func TestASignatureBindsMethodTargetAndBody(t *testing.T) {
	v := mustNew(t, Config{Mode: ModeSigned, Keys: []Key{k2}, Skew: 5 * time.Second})
	h := signedHeaders(k2, 42, t0)
	if _, r := v.User(reqCtx("198.51.100.4", h...)); r != OK {
		t.Fatalf("the signed request itself: %d", r)
	}
	for _, c := range []struct{ name, method, target, body string }{
		{"another route", orderMethod, "/api/seckill/submit", orderBody},
		{"the result route", "GET", "/api/v1/flash-sale/result/123", ""},
		{"another method", "PUT", orderTarget, orderBody},
		{"a query added", orderMethod, orderTarget + "?x=1", orderBody},
		{"the body changed", orderMethod, orderTarget, `{"skuId":1002}`},
		{"a byte appended to the body", orderMethod, orderTarget, orderBody + " "},
		{"the body dropped", orderMethod, orderTarget, ""},
	} {
		if _, r := v.User(sendCtx("198.51.100.4", c.method, c.target, c.body, h...)); r != BadSig {
			t.Errorf("%s under the order's signature: %d, want BadSig", c.name, r)
		}
	}
	// A GET without a body signs the empty body's digest.
	g := signedFor(k2, "GET", "/api/v1/flash-sale/result/123", "", 42, t0)
	if _, r := v.User(sendCtx("198.51.100.4", "GET", "/api/v1/flash-sale/result/123", "", g...)); r != OK {
		t.Fatalf("a signed GET: %d", r)
	}
}

// The exact string the gateway signs, computed here by hand: a gateway
// written from the documentation verifies.
func TestTheSignedStringIsTheDocumentedOne(t *testing.T) {
	v := mustNew(t, Config{Mode: ModeSigned, Keys: []Key{k2}, Skew: 5 * time.Second})
	digest := sha256.Sum256([]byte(orderBody))
	msg := "v2|POST|/api/v1/flash-sale/order|" + hex.EncodeToString(digest[:]) + "|42|" + strconv.FormatInt(t0.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(k2.Secret))
	mac.Write([]byte(msg))
	h := [][2]string{{HeaderUser, "42"}, {HeaderTs, strconv.FormatInt(t0.Unix(), 10)}, {HeaderSig, "g2:" + hex.EncodeToString(mac.Sum(nil))}}
	if _, r := v.User(reqCtx("198.51.100.4", h...)); r != OK {
		t.Fatalf("the documented string: %d", r)
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
		{Mode: ModeSigned, Keys: []Key{k1}, Skew: time.Minute},
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
	v := mustNew(b, Config{Mode: ModeSigned, Keys: []Key{k2, k1}, Skew: 5 * time.Second})
	ctx := reqCtx("198.51.100.4", signedHeaders(k1, 42, t0)...) // the second key: the key search too
	b.ReportAllocs()
	for b.Loop() {
		if _, r := v.User(ctx); r != OK {
			b.Fatal(r)
		}
	}
}
