// Package web serves the two pages people look at: the buyer page on the
// public listener (static, embedded, CDN-cacheable; it talks only to the
// public API) and the on-call page on the admin listener (every data call
// and action goes through the admin API with the admin token). It also
// serves the buyer's result as a stream of server-sent events, so the page
// learns the outcome of a ticket the moment the consumer writes it, and the
// buyer's own orders from the orders database (orders.go). The on-call
// page's charts are drawn by uPlot, vendored in static/uplot.
package web

import (
	"bufio"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"mime"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"seckill/edge"
	"seckill/internal/identity"
	"seckill/sale"
	"seckill/stock/results"
)

//go:embed static
var static embed.FS

var files, _ = fs.Sub(static, "static")

// serveFile answers one embedded file with cache headers.
func serveFile(ctx *fasthttp.RequestCtx, name, cacheControl string) {
	b, err := fs.ReadFile(files, name)
	if err != nil {
		edge.AnswerNotFound.Write(ctx)
		return
	}
	ext := path.Ext(name)
	ct := mime.TypeByExtension(ext)
	switch {
	case ct != "":
	case ext == "": // LICENSE
		ct = "text/plain; charset=utf-8"
	default:
		ct = "application/octet-stream"
	}
	ctx.SetContentType(ct)
	ctx.Response.Header.Set("Cache-Control", cacheControl)
	ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	ctx.SetBody(b)
}

// page serves the files of one page from the embedded set: index for the
// bare path, any other listed file by name, with one cache policy.
func page(index, cacheControl string, allowed ...string) fasthttp.RequestHandler {
	ok := map[string]bool{index: true}
	for _, f := range allowed {
		ok[f] = true
	}
	return func(ctx *fasthttp.RequestCtx) {
		name, _ := ctx.UserValue("file").(string)
		name = path.Clean("/" + name)[1:]
		if name == "" {
			name = index
		}
		if !ok[name] {
			edge.AnswerNotFound.Write(ctx)
			return
		}
		serveFile(ctx, name, cacheControl)
	}
}

// Buyer serves the buyer page: GET /sale (index) and /sale/{file}. The
// assets carry no user data, so a CDN may cache them (one minute: a deploy
// shows up quickly without cache busting).
var Buyer = page("buyer.html", "public, max-age=60", "buyer.js", "style.css")

// OnCall serves the on-call page's static shell (no data in it: every
// number and every button goes through the admin API with the token) and
// the chart library it draws with, uPlot (vendored in static/uplot, see
// its README for the pinned version): GET /admin/ui and /admin/ui/{file:*}.
var OnCall = page("oncall.html", "no-store", "oncall.js", "support.js", "style.css",
	"uplot/uPlot.iife.min.js", "uplot/uPlot.min.css", "uplot/LICENSE")

// ResultEvents streams a ticket's result as server-sent events:
// GET /api/v1/flash-sale/result/{requestNo}/events. It sends the current
// state at once and then every change, and ends after a terminal state
// (SUCCESS, FAIL), after MaxWait, or when a write fails (the client went
// away). Changes are pushed (ResultHub): a waiting stream costs Redis
// nothing but a read every Recheck. Only the owner (X-User-Id) may listen;
// anyone else gets the same 404 as for an unknown ticket; a user with
// MaxPerUser streams open gets 429. Safe for concurrent use.
type ResultEvents struct {
	results *results.Store
	hub     *ResultHub // nil: poll every Recheck
	cfg     edge.StreamConfig
	// Identity is the X-User-Id check (edge.identity); nil checks as mode
	// any. Set it before the first request.
	Identity *identity.Verifier
	// fallback, if set, is asked when Redis has no result for the ticket
	// (a restart without persistence lost it): the orders database, as for
	// the result route. While the answer comes from it, the stream reads
	// at most once per fallbackPoll (1s), to spare the database.
	// The fallback is told the stream's user, so that it can bound one
	// user's reads (edge.DBBound).
	fallback     func(ctx context.Context, user int64, requestNo string) (results.Entry, error)
	fallbackPoll time.Duration
	// Log hears of a stream whose writer panicked (the stream is closed,
	// the process lives); nil: no log. Set it before the first request.
	Log *zap.Logger
	// Position reads a WAITING result's code ("<partition>:<offset>") as
	// its place in line and estimated wait (-1: unknown); nil: WAITING
	// events carry neither. Set it before the first request.
	Position func(code string) (int64, time.Duration, bool)
	panics   atomic.Int64

	mu     sync.Mutex
	open   map[int64]int // user -> open streams
	total  atomic.Int64
	closed chan struct{}
}

// NewResultEvents returns the stream handler. hub may be nil (then each
// stream polls every cfg.Recheck, 100ms by default), fallback too.
func NewResultEvents(res *results.Store, hub *ResultHub, cfg edge.StreamConfig,
	fallback func(ctx context.Context, user int64, requestNo string) (results.Entry, error)) *ResultEvents {
	d := edge.DefaultStreamConfig()
	if hub == nil {
		d.Recheck = 100 * time.Millisecond
	}
	if cfg.MaxPerUser <= 0 {
		cfg.MaxPerUser = d.MaxPerUser
	}
	for _, p := range []struct{ v, def *time.Duration }{{&cfg.Heartbeat, &d.Heartbeat},
		{&cfg.WriteTimeout, &d.WriteTimeout}, {&cfg.MaxWait, &d.MaxWait}, {&cfg.Recheck, &d.Recheck}} {
		if *p.v <= 0 {
			*p.v = *p.def
		}
	}
	return &ResultEvents{results: res, hub: hub, cfg: cfg, fallback: fallback, fallbackPoll: time.Second,
		open: map[int64]int{}, closed: make(chan struct{})}
}

// Open is the number of streams open now.
func (h *ResultEvents) Open() int64 { return h.total.Load() }

// Panics is the number of streams whose writer panicked (and was closed):
// seckill_result_stream_panics_total.
func (h *ResultEvents) Panics() int64 { return h.panics.Load() }

// recoverStream ends a stream whose writer panicked: it runs on a
// goroutine of its own, where a panic would otherwise end the process
// with every buyer's stream; this one closes, counted and logged.
func (h *ResultEvents) recoverStream(rn string) {
	if v := recover(); v != nil {
		h.panics.Add(1)
		if h.Log != nil {
			h.Log.Error("result stream writer panicked; the stream is closed", zap.String("requestNo", rn),
				zap.Any("panic", v), zap.StackSkip("stack", 1))
		}
	}
}

// Close ends every open stream (at its next wake-up) and refuses new ones.
func (h *ResultEvents) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.closed:
	default:
		close(h.closed)
	}
}

// take counts a stream of user, false past MaxPerUser.
func (h *ResultEvents) take(user int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.open[user] >= h.cfg.MaxPerUser {
		return false
	}
	h.open[user]++
	h.total.Add(1)
	return true
}

func (h *ResultEvents) give(user int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.open[user]--; h.open[user] <= 0 {
		delete(h.open, user)
	}
	h.total.Add(-1)
}

// read reads the ticket's result from Redis, else from the fallback; fromDB
// tells which answered.
func (h *ResultEvents) read(user int64, rn string) (e results.Entry, fromDB bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	e, err = h.results.Read(ctx, user, rn)
	if errors.Is(err, results.ErrNotFound) && h.fallback != nil {
		e, err = h.fallback(ctx, user, rn)
		return e, true, err
	}
	if err == nil && e.Claimed && h.fallback != nil {
		// QUEUING, claimed: the database tells whether the order was
		// written and Redis lost its final result.
		// Only an order answers it (Entry.Ordered).
		if f, ferr := h.fallback(ctx, user, rn); ferr == nil && f.Owner == user && f.Ordered() {
			return f, true, nil
		}
	}
	return e, false, err
}

type event struct {
	Code      string `json:"code"`
	RequestNo string `json:"requestNo"`
	OrderNo   string `json:"orderNo,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// Position and EtaMs are a WAITING ticket's place in its SKU's line
	// and the wait it should take (queue mode).
	Position *int64 `json:"position,omitempty"`
	EtaMs    *int64 `json:"etaMs,omitempty"`
}

// open reports a result that may still change.
func (ev *event) open() bool { return ev.Code == sale.ResultQueuing || ev.Code == sale.ResultWaiting }

// same reports ev and o tell the buyer the same.
func (ev *event) same(o *event) bool {
	eq := func(a, b *int64) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }
	return ev.Code == o.Code && ev.RequestNo == o.RequestNo && ev.OrderNo == o.OrderNo && ev.Reason == o.Reason &&
		eq(ev.Position, o.Position) && eq(ev.EtaMs, o.EtaMs)
}

func (h *ResultEvents) toEvent(e results.Entry) event {
	ev := event{Code: e.State, RequestNo: e.RequestNo, OrderNo: e.OrderNo}
	if e.State == sale.ResultFail {
		ev.Reason = e.Code
	}
	if e.State == sale.ResultWaiting && h.Position != nil {
		if pos, eta, ok := h.Position(e.Code); ok {
			ev.Position = &pos
			if eta >= 0 {
				ms := eta.Milliseconds()
				ev.EtaMs = &ms
			}
		}
	}
	if ev.Code == "" {
		ev.Code = sale.ResultQueuing
	}
	return ev
}

// Handle is the fasthttp handler.
func (h *ResultEvents) Handle(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("Cache-Control", "no-store")
	user, r := h.Identity.User(ctx)
	if r != identity.OK {
		edge.IdentityAnswer(r).Write(ctx)
		return
	}
	rn, _ := ctx.UserValue("requestNo").(string)
	if rn == "" || len(rn) > 64 {
		edge.AnswerNotFound.Write(ctx)
		return
	}
	if !h.take(user) {
		// A place frees when one of the user's streams ends (at the
		// latest after MaxWait); a second is a fair guess at a retry.
		edge.AnswerTooManyStreams.Retry(ctx, time.Second)
		return
	}
	var wakeup chan struct{}
	stop := func() {}
	if h.hub != nil {
		// Watch before the first read: a result written in between
		// wakes the stream.
		wakeup, stop = h.hub.watch(rn)
	}
	first, fromDB, err := h.read(user, rn)
	if err != nil || first.Owner != user {
		stop()
		h.give(user)
		if errors.Is(err, results.ErrNotFound) || err == nil {
			edge.AnswerNotFound.Write(ctx)
			return
		}
		// Redis, the database or the bound on one user's database reads.
		edge.AnswerBusy.Retry(ctx, time.Second)
		return
	}
	ctx.SetContentType("text/event-stream")
	ctx.Response.Header.Set("X-Accel-Buffering", "no") // proxies must not buffer the stream
	// fasthttp would set the listener's write_timeout as the deadline of
	// the whole response once the handler returns, cutting the stream
	// then; a deadline the handler sets is left alone, so the stream sets
	// one per write instead (on the connection: the writer below runs on
	// its own goroutine, which must not touch ctx once the server may have
	// moved on).
	conn := ctx.Conn()
	_ = ctx.SetWriteDeadline(time.Now().Add(h.cfg.WriteTimeout))
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		defer h.give(user)
		defer stop()
		defer h.recoverStream(rn)
		send := func(b ...[]byte) bool {
			_ = conn.SetWriteDeadline(time.Now().Add(h.cfg.WriteTimeout))
			for _, p := range b {
				w.Write(p)
			}
			return w.Flush() == nil // false: the client went away
		}
		heartbeat := time.NewTicker(h.cfg.Heartbeat)
		defer heartbeat.Stop()
		recheck := time.NewTicker(h.cfg.Recheck)
		defer recheck.Stop()
		end := time.NewTimer(h.cfg.MaxWait)
		defer end.Stop()
		var last event
		cur, lastRead := first, time.Now()
		for {
			if ev := h.toEvent(cur); !ev.same(&last) {
				b, _ := json.Marshal(ev)
				if !send(eventHead, b, eventTail) {
					return
				}
				last = ev
			}
			if !last.open() {
				return
			}
			select {
			case <-wakeup:
			case <-recheck.C:
				if fromDB && time.Since(lastRead) < h.fallbackPoll {
					continue
				}
			case <-heartbeat.C:
				if !send(ping) {
					return
				}
				continue
			case <-end.C:
				return
			case <-h.closed:
				return
			}
			next, db, err := h.read(user, rn)
			lastRead = time.Now()
			if err == nil && next.Owner == user {
				cur, fromDB = next, db
			}
		}
	})
}

var (
	eventHead = []byte("event: result\ndata: ")
	eventTail = []byte("\n\n")
	ping      = []byte(": ping\n\n")
)

// Counter is one counter sample of /admin/v1/counters.
type Counter struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
	Value  float64           `json:"value"`
}

// counterFamilies are what the on-call page turns into rates.
var counterFamilies = map[string]bool{
	"seckill_edge_requests_total":     true,
	"seckill_edge_rejections_total":   true,
	"seckill_edge_engine_calls_total": true,
	// Per SKU: accepted and rejected purchases, by activity and SKU.
	"seckill_edge_sku_purchases_total": true,
	"seckill_consumer_messages_total":  true,
	"seckill_engine_occupy_total":      true,
	"seckill_engine_releases_total":    true,
}

// Counters answers GET /admin/v1/counters: the current values of the
// counters the on-call page shows as rates.
func Counters(g prometheus.Gatherer) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		mfs, err := g.Gather()
		if err != nil {
			ctx.SetStatusCode(fasthttp.StatusInternalServerError)
			return
		}
		out := []Counter{}
		for _, mf := range mfs {
			if !counterFamilies[mf.GetName()] {
				continue
			}
			for _, m := range mf.GetMetric() {
				c := Counter{Name: mf.GetName(), Labels: map[string]string{}, Value: m.GetCounter().GetValue()}
				for _, lp := range m.GetLabel() {
					c.Labels[lp.GetName()] = lp.GetValue()
				}
				out = append(out, c)
			}
		}
		b, _ := json.Marshal(out)
		ctx.SetContentType("application/json")
		ctx.Response.Header.Set("Cache-Control", "no-store")
		ctx.SetBody(b)
	}
}
