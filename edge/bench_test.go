package edge

import (
	"testing"

	"github.com/valyala/fasthttp"

	"seckill/internal/sale"
)

// benchOrder runs the order handler on one reused RequestCtx, as fasthttp
// does for a keep-alive connection.
func benchOrder(b *testing.B, e *edgeEnv, body string, want int) {
	b.Helper()
	var req fasthttp.Request
	req.Header.SetMethod("POST")
	req.SetRequestURI("/api/v1/flash-sale/order")
	req.Header.Set("X-User-Id", "123456")
	req.Header.SetContentType("application/json")
	req.SetBodyString(body)
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, nil, nil)
	h := e.srv.Handler()
	h(&ctx) // warm the response buffers
	if got := ctx.Response.StatusCode(); got != want {
		b.Fatalf("status %d %s, want %d", got, ctx.Response.Body(), want)
	}
	b.ReportAllocs()
	for b.Loop() {
		ctx.Response.Reset()
		h(&ctx)
	}
}

// BenchmarkRejectSoldOut is the hot reject path after a SKU sells out:
// routing, body and header checks, parse, activity view, sold-out flag,
// pre-built 410.
func BenchmarkRejectSoldOut(b *testing.B) {
	e := newEdge(b)
	e.srv.HandleEvent(sale.Event{Kind: sale.EventSoldOut, Activity: 7, SKU: 1001})
	e.srv.flags.Wait()
	benchOrder(b, e, `{"skuId":1001,"quantity":1}`, 410)
}

// BenchmarkRejectNotOpen is the reject path before the start.
func BenchmarkRejectNotOpen(b *testing.B) {
	e := newEdge(b)
	e.clock.set(saleStart.Add(-1))
	benchOrder(b, e, `{"skuId":1001,"quantity":1}`, 425)
}

// BenchmarkOrderQueued is the accepted path with a no-op engine: what the
// edge itself adds in front of the engine.
func BenchmarkOrderQueued(b *testing.B) {
	e := newEdge(b)
	benchOrder(b, e, `{"skuId":1001,"quantity":1}`, 200)
}
