package edge

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"seckill/sale"
)

// admitting is production's admission with limits no benchmark reaches:
// every check runs (address from a trusted proxy's X-Forwarded-For,
// blocklists with entries, per-IP and per-user limits) and passes.
func admitting() envOption {
	return withConfig(func(c *Config) {
		c.TrustedProxies = []string{"10.0.0.0/8"}
		c.Blocklist.IPs = []string{"192.0.2.0/24", "198.51.100.7"}
		c.Blocklist.Users = []int64{666}
		c.Rate.IPPerSecond, c.Rate.IPBurst = 1e9, 1e6
		c.Rate.UserPerSecond, c.Rate.UserBurst = 1e9, 1e6
	})
}

// benchOrder runs the handler on one reused RequestCtx, as fasthttp does
// for a keep-alive connection, from a client behind a trusted proxy.
func benchOrder(b *testing.B, e *edgeEnv, body string, want int) {
	b.Helper()
	var req fasthttp.Request
	req.Header.SetMethod("POST")
	req.SetRequestURI("/api/v1/flash-sale/order")
	req.Header.Set("X-User-Id", "123456")
	req.Header.Set("X-Forwarded-For", "203.0.113.7, 10.0.0.9")
	req.Header.SetContentType("application/json")
	req.SetBodyString(body)
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, nil, nil)
	ctx.SetRemoteAddr(&net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 40000})
	h := e.srv.Handler()
	h(&ctx) // warm the response buffers
	if got := ctx.Response.StatusCode(); got != want {
		b.Fatalf("status %d %s, want %d", got, ctx.Response.Body(), want)
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		ctx.Response.Reset()
		h(&ctx)
	}
	// CPU time as well as wall time: the machine may be shared.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's user+system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkRejectSoldOut is the hot reject path after a SKU sells out:
// client address, blocklists, per-IP and per-user limits, routing, body and
// header checks, parse, activity view, sold-out flag, pre-built 410.
func BenchmarkRejectSoldOut(b *testing.B) {
	// A flag outlives the run: with the default TTL it would lapse after
	// two seconds and the rest of the run would measure the accept path.
	e := newEdge(b, admitting(), withConfig(func(c *Config) { c.SoldOutTTL = time.Hour }))
	e.srv.HandleEvent(sale.Event{Kind: sale.EventSoldOut, Activity: 7, SKU: 1001})
	e.srv.flags.cache.Wait()
	benchOrder(b, e, `{"skuId":1001,"quantity":1}`, 410)
}

// BenchmarkRejectNotOpen is the reject path before the start.
func BenchmarkRejectNotOpen(b *testing.B) {
	e := newEdge(b, admitting())
	e.clock.set(saleStart.Add(-1))
	benchOrder(b, e, `{"skuId":1001,"quantity":1}`, 425)
}

// BenchmarkOrderQueued is the accepted path with a no-op engine: what the
// edge itself adds in front of the engine.
func BenchmarkOrderQueued(b *testing.B) {
	e := newEdge(b, admitting())
	benchOrder(b, e, `{"skuId":1001,"quantity":1}`, 200)
}

// BenchmarkRejectRateLimited is a 429 of the per-user limit, Retry-After
// included.
func BenchmarkRejectRateLimited(b *testing.B) {
	e := newEdge(b, withConfig(func(c *Config) { c.Rate.UserPerSecond, c.Rate.UserBurst = 1e-6, 1 }))
	e.srv.admit.lim.Load().user.Allow(123456) // spends the one-request burst
	benchOrder(b, e, `{"skuId":1001,"quantity":1}`, 429)
}

// BenchmarkRejectGate is a 429 of the admission gate at its floor.
func BenchmarkRejectGate(b *testing.B) {
	e := newEdge(b, admitting(), withConfig(func(c *Config) { c.Rate.GateK, c.Rate.GateFloor = 1, 1 }))
	e.srv.admit.gate.Observe(1001, 0)
	e.srv.admit.gate.Allow(1001) // spends the floor's burst of one
	benchOrder(b, e, `{"skuId":1001,"quantity":1}`, 429)
}

// BenchmarkRejectInflight is a 429 of the per-SKU bound on attempts inside
// the engine, with one attempt held inside.
func BenchmarkRejectInflight(b *testing.B) {
	e := newEdge(b, admitting(), withConfig(func(c *Config) { c.Rate.SKUInflight, c.Rate.SKUInflightWait = 1, 0 }))
	e.srv.admit.inflight.Acquire(1001) // the one place, held
	benchOrder(b, e, `{"skuId":1001,"quantity":1}`, 429)
}
