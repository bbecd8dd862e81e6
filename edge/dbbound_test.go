package edge

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"seckill/stock/results"
)

// One user naming well-formed ids that exist nowhere — bare numbers,
// which skip Redis, and ticket numbers Redis does not hold — reaches the
// orders database at most its bound's burst of times; past it 429 with
// Retry-After. An id the database did not know is answered 404 without
// another read, and another user is not held back. (Before: every id
// cost the database its lookups, without bound.)
func TestTheResultFallbackIsBoundedPerUser(t *testing.T) {
	var reads atomic.Int64
	fallback := func(_ context.Context, rn string) (results.Entry, error) {
		reads.Add(1)
		return results.Entry{}, results.ErrNotFound
	}
	cfg := DefaultConfig()
	cfg.DBReadsPerUser, cfg.DBMissTTL = 1, time.Minute // a burst of 5
	b, err := NewDBBound(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	e := newEdge(t, withOptions(WithResultFallback(fallback), WithDBBound(b)))
	limited := 0
	for i := range 40 {
		rn := strconv.Itoa(385465232614494208 + i) // a bare number: no Redis call, the database asked
		if i%2 == 1 {
			rn = "7-1001-" + rn
		}
		r := e.do("GET", "/api/v1/flash-sale/result/"+rn, "5", "")
		switch r.status {
		case 404:
		case 429:
			limited++
			if r.header["Retry-After"] == "" {
				t.Fatalf("429 without Retry-After: %s", r.raw)
			}
		default:
			t.Fatalf("id %s: %d %s", rn, r.status, r.raw)
		}
	}
	if n := reads.Load(); n > 6 || limited < 30 {
		t.Fatalf("40 unknown ids cost the database %d reads (%d limited), want at most the burst", n, limited)
	}
	// A remembered miss costs nothing, even past the bound.
	before := reads.Load()
	for range 5 {
		if r := e.do("GET", "/api/v1/flash-sale/result/385465232614494208", "5", ""); r.status != 404 {
			t.Fatalf("a remembered miss: %d %s", r.status, r.raw)
		}
	}
	if reads.Load() != before {
		t.Fatalf("a remembered miss read the database again")
	}
	// Another user has their own reads.
	if r := e.do("GET", "/api/v1/flash-sale/result/385465232614499999", "6", ""); r.status != 404 || reads.Load() != before+1 {
		t.Fatalf("another user: %d %s (reads %d)", r.status, r.raw, reads.Load()-before)
	}
}

// The pay route reads the database for any order number a buyer names:
// behind Guard a user past the bound is 429 and the route is not called;
// another user still is.
func TestDBBoundGuardStopsOneUsersLookups(t *testing.T) {
	var calls atomic.Int64
	pay := payGuard(t, func(ctx *fasthttp.RequestCtx) { calls.Add(1) })
	do := func(user string) int {
		r := pay(user)
		if r.StatusCode() == 429 && len(r.Header.Peek("Retry-After")) == 0 {
			t.Fatal("429 without Retry-After")
		}
		return r.StatusCode()
	}
	if s := do(""); s != 401 {
		t.Fatalf("no user: %d", s)
	}
	limited := 0
	for range 20 {
		if do("5") == 429 {
			limited++
		}
	}
	if calls.Load() > 6 || limited < 14 {
		t.Fatalf("20 lookups of one user: %d reached the route, %d limited", calls.Load(), limited)
	}
	before := calls.Load()
	if s := do("6"); s != 200 || calls.Load() != before+1 {
		t.Fatalf("another user: %d", s)
	}
}

// payGuard is a DBBound's Guard (1 read a second, a burst of 5) in front
// of h, and a call of it as user ("": no X-User-Id) on the pay route.
func payGuard(t *testing.T, h fasthttp.RequestHandler) func(user string) *fasthttp.Response {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DBReadsPerUser = 1 // a burst of 5
	b, err := NewDBBound(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	g := b.Guard(nil, h)
	return func(user string) *fasthttp.Response {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("POST")
		ctx.Request.SetRequestURI("/api/v1/flash-sale/orders/O1/pay")
		if user != "" {
			ctx.Request.Header.Set("X-User-Id", user)
		}
		g(&ctx)
		var r fasthttp.Response
		ctx.Response.CopyTo(&r)
		return &r
	}
}

// TestAnInFlightMissIsNotRemembered: the fallback of a claimed ticket —
// its order may be committing — reads the database on every call within
// the bound and leaves no remembered miss: once the order is there, both
// fallbacks find it. A plain miss is remembered as before.
func TestAnInFlightMissIsNotRemembered(t *testing.T) {
	var committed atomic.Bool
	var reads atomic.Int64
	fallback := func(_ context.Context, rn string) (results.Entry, error) {
		reads.Add(1)
		if !committed.Load() {
			return results.Entry{}, results.ErrNotFound
		}
		return results.Entry{RequestNo: rn, Owner: 5, State: "SUCCESS", OrderNo: "o1"}, nil
	}
	cfg := DefaultConfig()
	cfg.DBReadsPerUser, cfg.DBMissTTL = 100, time.Minute
	b, err := NewDBBound(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	ctx := context.Background()
	const rn = "7-1001-385465232614494208"
	for range 3 {
		if _, err := b.FallbackInFlight(fallback)(ctx, 5, rn); !errors.Is(err, results.ErrNotFound) {
			t.Fatalf("before the commit: %v", err)
		}
	}
	b.neg.Wait()
	if n := reads.Load(); n != 3 {
		t.Fatalf("3 in-flight reads cost the database %d, want each its own", n)
	}
	committed.Store(true)
	for _, f := range []func(context.Context, int64, string) (results.Entry, error){b.FallbackInFlight(fallback), b.Fallback(fallback)} {
		if e, err := f(ctx, 5, rn); err != nil || e.OrderNo != "o1" {
			t.Fatalf("after the commit: %+v %v, want the order", e, err)
		}
	}
	// A plain miss is remembered: the next read of that id costs nothing.
	const other = "7-1001-385465232614494209"
	committed.Store(false)
	if _, err := b.Fallback(fallback)(ctx, 5, other); !errors.Is(err, results.ErrNotFound) {
		t.Fatal(err)
	}
	b.neg.Wait()
	before := reads.Load()
	if _, err := b.Fallback(fallback)(ctx, 5, other); !errors.Is(err, results.ErrNotFound) || reads.Load() != before {
		t.Fatalf("a remembered miss: %v, %d reads after %d", err, reads.Load(), before)
	}
}
