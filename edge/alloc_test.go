//go:build !race

package edge

// The race detector makes sync.Pool drop items on purpose, so allocation
// counts mean nothing under -race: this file is built without it only
// (make test runs it in its own pass without -race).

import (
	"net"
	"testing"

	"github.com/valyala/fasthttp"

	"seckill/sale"
)

// TestSKUTallyDoesNotAllocate: counting runs once per purchase of a known
// SKU, accepted or rejected, and so does finding the tally of a view built
// per request (a purchase that names its activity).
func TestSKUTallyDoesNotAllocate(t *testing.T) {
	e := newEdge(t)
	c := e.srv.views.tallies.of(7, 1001)
	if c == nil {
		t.Fatal("no tally for activity 7's SKU 1001")
	}
	var ok, refused fasthttp.RequestCtx
	ok.SetStatusCode(fasthttp.StatusOK)
	refused.SetStatusCode(fasthttp.StatusGone)
	if n := testing.AllocsPerRun(200, func() { c.answered(&ok); c.answered(&refused) }); n != 0 {
		t.Fatalf("counting allocates %.1f per purchase", n)
	}
	if n := testing.AllocsPerRun(200, func() { e.srv.views.tallies.of(7, 1002) }); n != 0 {
		t.Fatalf("finding a tally allocates %.1f", n)
	}
}

// TestRejectSoldOutDoesNotAllocate: the whole sold-out reject path, its
// per-SKU count included, as BenchmarkRejectSoldOut runs it.
func TestRejectSoldOutDoesNotAllocate(t *testing.T) {
	e := newEdge(t, admitting())
	e.srv.HandleEvent(sale.Event{Kind: sale.EventSoldOut, Activity: 7, SKU: 1001})
	e.srv.flags.cache.Wait()
	var req fasthttp.Request
	req.Header.SetMethod("POST")
	req.SetRequestURI("/api/v1/flash-sale/order")
	req.Header.Set("X-User-Id", "123456")
	req.Header.Set("X-Forwarded-For", "203.0.113.7, 10.0.0.9")
	req.Header.SetContentType("application/json")
	req.SetBodyString(`{"skuId":1001,"quantity":1}`)
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, nil, nil)
	ctx.SetRemoteAddr(&net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 40000})
	h := e.srv.Handler()
	h(&ctx) // warm the response buffers and build the SKU's view
	e.srv.views.cache.Wait()
	if got := ctx.Response.StatusCode(); got != 410 {
		t.Fatalf("status %d %s, want 410", got, ctx.Response.Body())
	}
	before := skuPurchases(t, e.reg)["7/1001/rejected"]
	if n := testing.AllocsPerRun(200, func() { ctx.Response.Reset(); h(&ctx) }); n != 0 {
		t.Fatalf("the sold-out reject path allocates %.1f per request", n)
	}
	// AllocsPerRun runs the function once more than it averages over.
	if got := skuPurchases(t, e.reg)["7/1001/rejected"]; got != before+201 {
		t.Fatalf("rejected count went from %v to %v over 201 requests", before, got)
	}
}
