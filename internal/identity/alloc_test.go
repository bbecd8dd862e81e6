//go:build !race

package identity

// The race detector makes sync.Pool drop items on purpose, so allocation
// counts mean nothing under -race: this file is built without it only
// (make test runs it in its own pass without -race).

import (
	"net/netip"
	"testing"
	"time"
)

// TestSignedDoesNotAllocate: the check runs once per purchase.
func TestSignedDoesNotAllocate(t *testing.T) {
	v := mustNew(t, Config{Mode: ModeSigned, Keys: []Key{k2, k1}, Skew: 5 * time.Second})
	ctx := reqCtx("198.51.100.4", signedHeaders(k1, 42, t0)...)
	if _, r := v.User(ctx); r != OK {
		t.Fatal(r)
	}
	if n := testing.AllocsPerRun(200, func() { v.User(ctx) }); n != 0 {
		t.Fatalf("signed check allocates %.1f per request", n)
	}
	tp := mustNew(t, Config{Mode: ModeTrustedProxies, Trusted: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}})
	if n := testing.AllocsPerRun(200, func() { tp.User(ctx) }); n != 0 {
		t.Fatalf("trusted_proxies check allocates %.1f per request", n)
	}
}
