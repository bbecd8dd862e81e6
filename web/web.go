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
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"seckill/internal/identity"
	"seckill/internal/results"
	"seckill/internal/sale"
)

//go:embed static
var static embed.FS

var files, _ = fs.Sub(static, "static")

// serveFile answers one embedded file with cache headers.
func serveFile(ctx *fasthttp.RequestCtx, name, cacheControl string) {
	b, err := fs.ReadFile(files, name)
	if err != nil {
		ctx.SetStatusCode(fasthttp.StatusNotFound)
		ctx.SetBodyString("not found")
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
			ctx.SetStatusCode(fasthttp.StatusNotFound)
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
var OnCall = page("oncall.html", "no-store", "oncall.js", "style.css",
	"uplot/uPlot.iife.min.js", "uplot/uPlot.min.css", "uplot/LICENSE")

// ResultEvents streams a ticket's result as server-sent events:
// GET /api/v1/flash-sale/result/{requestNo}/events. It sends the current
// state at once and then every change, and ends after a terminal state
// (SUCCESS, FAIL) or after maxWait. Only the owner (X-User-Id) may listen;
// anyone else gets the same 404 as for an unknown ticket.
type ResultEvents struct {
	Results *results.Store
	// Identity is the X-User-Id check (edge.identity); nil checks as mode
	// any.
	Identity *identity.Verifier
	// Poll is how often Redis is read while the ticket is queuing.
	// Default 100ms.
	Poll time.Duration
	// MaxWait ends a stream that stays QUEUING. Default 30s; the page
	// falls back to polling after it.
	MaxWait time.Duration
	// Fallback, if set, is asked when Redis has no result for the ticket
	// (a restart without persistence lost it): the orders database, as for
	// the result route. While the answer comes from it, the stream reads
	// at most once per FallbackPoll (default 1s), to spare the database.
	Fallback     func(ctx context.Context, requestNo string) (results.Entry, error)
	FallbackPoll time.Duration
}

// read reads the ticket's result from Redis, else from the fallback; fromDB
// tells which answered.
func (h ResultEvents) read(rn string) (e results.Entry, fromDB bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	e, err = h.Results.Read(ctx, rn)
	if errors.Is(err, results.ErrNotFound) && h.Fallback != nil {
		e, err = h.Fallback(ctx, rn)
		return e, true, err
	}
	return e, false, err
}

type event struct {
	Code      string `json:"code"`
	RequestNo string `json:"requestNo"`
	OrderNo   string `json:"orderNo,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

func toEvent(e results.Entry) event {
	ev := event{Code: e.State, RequestNo: e.RequestNo, OrderNo: e.OrderNo}
	if e.State == sale.ResultFail {
		ev.Reason = e.Code
	}
	if ev.Code == "" {
		ev.Code = sale.ResultQueuing
	}
	return ev
}

// Handle is the fasthttp handler.
func (h ResultEvents) Handle(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("Cache-Control", "no-store")
	user, r := h.Identity.User(ctx)
	if r != identity.OK {
		identity.Refuse(ctx, r)
		return
	}
	rn, _ := ctx.UserValue("requestNo").(string)
	if rn == "" || len(rn) > 64 {
		notFound(ctx)
		return
	}
	first, fromDB, err := h.read(rn)
	if errors.Is(err, results.ErrNotFound) || err == nil && first.Owner != user {
		notFound(ctx)
		return
	}
	if err != nil {
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"code":"BUSY","message":"system busy, try again"}`)
		return
	}
	poll, maxWait, dbPoll := h.Poll, h.MaxWait, h.FallbackPoll
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	if dbPoll <= 0 {
		dbPoll = time.Second
	}
	if maxWait <= 0 {
		maxWait = 30 * time.Second
	}
	ctx.SetContentType("text/event-stream")
	ctx.Response.Header.Set("X-Accel-Buffering", "no") // proxies must not buffer the stream
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		last := ""
		deadline := time.Now().Add(maxWait)
		cur := first
		for {
			ev := toEvent(cur)
			if ev.Code != last {
				b, _ := json.Marshal(ev)
				w.WriteString("event: result\ndata: ")
				w.Write(b)
				w.WriteString("\n\n")
				if w.Flush() != nil {
					return // the client went away
				}
				last = ev.Code
			}
			if ev.Code != sale.ResultQueuing || time.Now().After(deadline) {
				return
			}
			if fromDB {
				time.Sleep(dbPoll)
			} else {
				time.Sleep(poll)
			}
			next, db, err := h.read(rn)
			if err == nil && next.Owner == user {
				cur, fromDB = next, db
			}
		}
	})
}

func notFound(ctx *fasthttp.RequestCtx) {
	ctx.SetStatusCode(fasthttp.StatusNotFound)
	ctx.SetContentType("application/json")
	ctx.SetBodyString(`{"code":"NOT_FOUND","message":"not found"}`)
}

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
	"seckill_consumer_messages_total": true,
	"seckill_engine_occupy_total":     true,
	"seckill_engine_releases_total":   true,
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
