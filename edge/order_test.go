package edge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"seckill/engine"
	"seckill/sale"
	"seckill/stock"
)

// tokenFunc adapts a function to TokenVerifier.
type tokenFunc func(token []byte, user int64, a *sale.Activity, sku int64, now time.Time) error

func (f tokenFunc) Verify(_ context.Context, token []byte, user int64, a *sale.Activity, sku int64, now time.Time) error {
	return f(token, user, a, sku, now)
}

var acceptToken = tokenFunc(func(token []byte, user int64, a *sale.Activity, sku int64, _ time.Time) error {
	if string(token) != fmt.Sprintf("ok-%d-%d", user, a.ID) {
		return fmt.Errorf("%w: bad signature", ErrTokenRefused)
	}
	return nil
})

// orderCase is one request and the answer it must get.
type orderCase struct {
	name      string
	method    string // default POST
	path      string // default the order route
	user      string // default "5"; "-" sends none
	body      string
	headers   []string // name, value pairs
	opts      []envOption
	setup     func(t *testing.T, e *edgeEnv)
	status    int
	code      string
	engineHit bool
}

func TestOrderStatuses(t *testing.T) {
	shared := newEdge(t) // puts the fixture; the cases share its Redis

	cases := []orderCase{
		{name: "a seed wrk order is queued", body: `{"skuId":1001,"quantity":1}`, status: 200, code: "QUEUING", engineHit: true},
		{name: "the seed-001 submit route takes its field names", path: "/api/seckill/submit",
			body: `{"activityId":7,"skuId":1001,"token":"t","requestId":"r-1"}`, status: 200, code: "QUEUING", engineHit: true},
		{name: "a GET on the order route is 405", method: "GET", status: 405, code: "METHOD_NOT_ALLOWED"},
		{name: "an unknown route is 404", path: "/api/v1/nope", status: 404, code: "NOT_FOUND"},
		{name: "a missing user is 401", user: "-", body: `{"skuId":1001}`, status: 401, code: "UNAUTHORIZED"},
		{name: "a non-numeric user is 400", user: "alice", body: `{"skuId":1001}`, status: 400, code: "BAD_REQUEST"},
		{name: "user zero is 400", user: "0", body: `{"skuId":1001}`, status: 400, code: "BAD_REQUEST"},
		{name: "malformed JSON is 400", body: `{"skuId":1001`, status: 400, code: "BAD_REQUEST"},
		{name: "a missing skuId is 400", body: `{"quantity":1}`, status: 400, code: "BAD_REQUEST"},
		{name: "a negative skuId is 400", body: `{"skuId":-3}`, status: 400, code: "BAD_REQUEST"},
		{name: "quantity zero is 400", body: `{"skuId":1001,"quantity":0}`, status: 400, code: "BAD_REQUEST"},
		{name: "quantity over 100 is 400", body: `{"skuId":1001,"quantity":101}`, status: 400, code: "BAD_REQUEST"},
		{name: "a duplicated skuId is 400", body: `{"skuId":1001,"skuId":1002}`, status: 400, code: "BAD_REQUEST"},
		{name: "an unknown sku is 404", body: `{"skuId":424242}`, status: 404, code: "UNKNOWN_SKU"},
		{name: "an activity that does not sell the sku is 404", body: `{"activityId":8,"skuId":1001}`, status: 404, code: "UNKNOWN_SKU"},
		{name: "an unknown activity is 404", body: `{"activityId":99,"skuId":1001}`, status: 404, code: "UNKNOWN_SKU"},
		{name: "before the start is 425", body: `{"skuId":1001}`, setup: func(t *testing.T, e *edgeEnv) { e.clock.set(saleStart.Add(-time.Millisecond)) },
			status: 425, code: "NOT_OPEN"},
		{name: "an offline activity is 425", body: `{"skuId":1003}`, status: 425, code: "NOT_OPEN"},
		{name: "at the end is 410 ended", body: `{"skuId":1001}`, setup: func(t *testing.T, e *edgeEnv) { e.clock.set(saleStart.Add(time.Hour)) },
			status: 410, code: "ENDED"},
		{name: "a local sold-out flag is 410 without the engine", body: `{"skuId":1001}`, setup: func(t *testing.T, e *edgeEnv) {
			e.srv.HandleEvent(sale.Event{Kind: sale.EventSoldOut, Activity: 7, SKU: 1001})
			e.srv.flags.cache.Wait()
		}, status: 410, code: "SOLD_OUT"},
		{name: "a sold-out flag of another sku does not stop this one", body: `{"skuId":1001}`, setup: func(t *testing.T, e *edgeEnv) {
			e.srv.HandleEvent(sale.Event{Kind: sale.EventSoldOut, Activity: 7, SKU: 1002})
			e.srv.flags.cache.Wait()
		}, status: 200, code: "QUEUING", engineHit: true},
		{name: "a token sale without a verifier is 403", body: `{"skuId":2001,"token":"ok-5-8"}`, status: 403, code: "TOKEN_REQUIRED"},
		{name: "a token sale without a token is 403", body: `{"skuId":2001}`, opts: []envOption{withOptions(WithTokenVerifier(acceptToken))},
			status: 403, code: "TOKEN_REQUIRED"},
		{name: "a refused token is 403", body: `{"skuId":2001,"token":"ok-6-8"}`, opts: []envOption{withOptions(WithTokenVerifier(acceptToken))},
			status: 403, code: "TOKEN_INVALID"},
		{name: "a verifier that cannot check is 503", body: `{"skuId":2001,"token":"x"}`, opts: []envOption{withOptions(WithTokenVerifier(
			tokenFunc(func([]byte, int64, *sale.Activity, int64, time.Time) error {
				return fmt.Errorf("%w: redis: i/o timeout", ErrTokenUnavailable)
			})))},
			status: 503, code: "BUSY"},
		{name: "a verifier's error of no known kind is 403", body: `{"skuId":2001,"token":"x"}`, opts: []envOption{withOptions(WithTokenVerifier(
			tokenFunc(func([]byte, int64, *sale.Activity, int64, time.Time) error {
				return errors.New("something nobody mapped")
			})))},
			status: 403, code: "TOKEN_INVALID"},
		{name: "the engine's busy from a verifier is not the token store's", body: `{"skuId":2001,"token":"x"}`, opts: []envOption{withOptions(WithTokenVerifier(
			tokenFunc(func([]byte, int64, *sale.Activity, int64, time.Time) error { return engine.ErrBusy })))},
			status: 403, code: "TOKEN_INVALID"},
		{name: "an accepted token reaches the engine", body: `{"skuId":2001,"token":"ok-5-8"}`, opts: []envOption{withOptions(WithTokenVerifier(acceptToken))},
			status: 200, code: "QUEUING", engineHit: true},
		{name: "a requestId that is not UTF-8 is 400", body: "{\"skuId\":1001,\"requestId\":\"\xff\xfe\"}", status: 400, code: "BAD_REQUEST"},
		{name: "a requestId with an escaped control character is 400", body: `{"skuId":1001,"requestId":"a\u0000b"}`, status: 400, code: "BAD_REQUEST"},
		{name: "a requestId of other scripts is queued", body: `{"skuId":1001,"requestId":"订单-é-\ud83d\ude00"}`, status: 200, code: "QUEUING", engineHit: true},
		{name: "an X-Trace-Id with a byte past ASCII that is not UTF-8 is 400", body: `{"skuId":1001}`, headers: []string{"X-Trace-Id", "t\x80"},
			status: 400, code: "BAD_REQUEST"},
		{name: "an X-Trace-Id with a control character is 400", body: `{"skuId":1001}`, headers: []string{"X-Trace-Id", "t\x01x"},
			status: 400, code: "BAD_REQUEST"},
		{name: "an X-Trace-Id of UTF-8 is queued", body: `{"skuId":1001}`, headers: []string{"X-Trace-Id", "trace-é"},
			status: 200, code: "QUEUING", engineHit: true},
		{name: "a token is ignored where none is required", body: `{"skuId":1001,"token":"whatever"}`, status: 200, code: "QUEUING", engineHit: true},
	}
	engineCases := []struct {
		err    error
		status int
		code   string
	}{
		{stock.ErrNotOpen, 425, "NOT_OPEN"},
		{stock.ErrEnded, 410, "ENDED"},
		{stock.ErrSoldOut, 410, "SOLD_OUT"},
		{stock.ErrDuplicate, 409, "DUPLICATE"},
		{stock.ErrOverLimit, 400, "OVER_LIMIT"},
		{stock.ErrUnknownSKU, 404, "UNKNOWN_SKU"},
		{engine.ErrBusy, 503, "BUSY"},
		{fmt.Errorf("occupy sku 1001: %w", engine.ErrBusy), 503, "BUSY"},
		{errors.New("something nobody mapped"), 503, "BUSY"},
	}
	for _, c := range engineCases {
		err := c.err
		cases = append(cases, orderCase{
			name: fmt.Sprintf("the engine's %q is %d %s", err, c.status, c.code),
			body: `{"skuId":1001}`, status: c.status, code: c.code, engineHit: true,
			setup: func(t *testing.T, e *edgeEnv) {
				e.eng.answer(func(*engine.Request) (engine.Ticket, error) {
					return engine.Ticket{RequestNo: "424242", Remaining: -1}, err
				})
			},
		})
	}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEdge(t, append([]envOption{withRedis(shared.redis)}, c.opts...)...)
			if c.setup != nil {
				c.setup(t, e)
			}
			method, path, user := c.method, c.path, c.user
			if method == "" {
				method = "POST"
			}
			if path == "" {
				path = "/api/v1/flash-sale/order"
			}
			switch user {
			case "":
				user = "5"
			case "-":
				user = ""
			}
			r := e.doVia(e.client, method, path, user, c.body, c.headers...)
			if r.status != c.status || r.code() != c.code {
				t.Fatalf("got %d %s (%s), want %d %s", r.status, r.code(), r.raw, c.status, c.code)
			}
			if _, ok := r.body["message"].(string); !ok {
				t.Errorf("body %s has no message", r.raw)
			}
			if got := e.eng.calls.Load() > 0; got != c.engineHit {
				t.Errorf("engine called: %v, want %v", got, c.engineHit)
			}
			if c.code == "QUEUING" || c.code == "DUPLICATE" {
				if rn, _ := r.body["requestNo"].(string); rn == "" {
					t.Errorf("body %s has no requestNo", r.raw)
				}
			}
		})
	}
}

func TestOrderPassesTheRequestToTheEngine(t *testing.T) {
	e := newEdge(t)
	r := e.do("POST", "/api/seckill/submit", "77", `{"activityId":"7","skuId":"1002","quantity":2,"requestId":"client-key-1"}`)
	if r.status != 200 {
		t.Fatalf("got %d %s", r.status, r.raw)
	}
	// The engine gets the edge's resolution: the catalog's entries.
	got := e.eng.lastRequest()
	if got.Activity == nil || got.SKU == nil || got.Activity.ID != 7 || got.SKU.ID != 1002 || got.SKU.Price != 12000 ||
		got.UserID != 77 || got.Quantity != 2 || got.TraceID != "client-key-1" {
		t.Fatalf("engine got %+v (activity %+v, sku %+v), want activity 7's SKU 1002 for user 77, quantity 2, trace client-key-1",
			got, got.Activity, got.SKU)
	}
	// Without activityId the edge resolves the current activity itself.
	e.order("78", `{"skuId":1001}`)
	if got := e.eng.lastRequest(); got.Activity.ID != 7 || got.SKU.ID != 1001 || got.SKU.Price != 990 || got.Quantity != 1 {
		t.Fatalf("engine got %+v, want activity 7's SKU 1001, quantity 1", got)
	}
}

func TestDuplicateAnswerNamesTheHeldTicket(t *testing.T) {
	e := newEdge(t)
	e.eng.answer(func(*engine.Request) (engine.Ticket, error) {
		return engine.Ticket{RequestNo: "123456789", Remaining: 3}, fmt.Errorf("occupy: %w", stock.ErrDuplicate)
	})
	r := e.order("5", `{"skuId":1001}`)
	if r.status != 409 || r.body["requestNo"] != "123456789" {
		t.Fatalf("got %d %s, want 409 naming 123456789", r.status, r.raw)
	}
}

func TestWindowIsJudgedByRedisTime(t *testing.T) {
	// This edge's clock runs an hour behind Redis; an activity that started
	// half an hour ago by Redis time is open although the local clock says
	// it has not started.
	local := time.Now()
	a := sale.Activity{ID: 30, Start: local.Add(30 * time.Minute), End: local.Add(2 * time.Hour), SKUs: []sale.SKU{{ID: 4001, Stock: 1, LimitPerUser: 1}}}
	e := newEdge(t, withRealClock(), withActivities(a), withOptions(WithTimeSource(func(context.Context) (time.Time, error) {
		return time.Now().Add(time.Hour), nil
	})))
	if r := e.order("5", `{"skuId":4001}`); r.status != 200 {
		t.Fatalf("got %d %s, want 200 by Redis time", r.status, r.raw)
	}
}

func TestClockOffsetFollowsRedisTime(t *testing.T) {
	e := newEdge(t, withRealClock())
	off := time.Duration(e.srv.clock.offset.Load())
	if off < -time.Second || off > time.Second {
		t.Fatalf("offset to a local redis-server is %v", off)
	}
	c := &serverClock{local: func() time.Time { return time.Now().Add(-time.Minute) }, source: redisTime(e.rdb)}
	if err := c.sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := time.Duration(c.now() - time.Now().UnixNano()); got < -time.Second || got > time.Second {
		t.Fatalf("a clock a minute slow reads %v off after sync", got)
	}
}

func TestBodyOverTheLimitIsRefusedBeforeItIsRead(t *testing.T) {
	e := newEdge(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = e.srv.Serve(ln) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Headers only: the 413 must come without the edge waiting for the
	// announced megabyte.
	_, err = fmt.Fprintf(c, "POST /api/v1/flash-sale/order HTTP/1.1\r\nHost: edge\r\nX-User-Id: 5\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n")
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var resp fasthttp.Response
	if err := resp.Read(bufio.NewReader(c)); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode() != 413 || !strings.Contains(string(resp.Body()), `"TOO_LARGE"`) {
		t.Fatalf("got %d %s, want 413 TOO_LARGE", resp.StatusCode(), resp.Body())
	}
	if e.eng.calls.Load() != 0 {
		t.Fatal("the engine was called")
	}
}

func TestHandlerRefusesABodyOverTheLimit(t *testing.T) {
	// Under a server without MaxRequestBodySize the handler still refuses.
	e := newEdge(t)
	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	req.Header.SetMethod("POST")
	req.SetRequestURI("/api/v1/flash-sale/order")
	req.Header.Set("X-User-Id", "5")
	req.SetBodyString(`{"skuId":1001,"pad":"` + strings.Repeat("x", 5000) + `"}`)
	ctx.Init(&req, nil, nil)
	e.srv.Handler()(&ctx)
	if ctx.Response.StatusCode() != 413 {
		t.Fatalf("got %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
}

// refundingVerifier accepts acceptToken's tokens and records refunds.
type refundingVerifier struct {
	tokenFunc
	refunded chan string
}

func (v refundingVerifier) Refund(_ context.Context, token []byte) { v.refunded <- string(token) }

// A token spent on a purchase the engine answers "busy" is given back, so
// the buyer can retry with it; a token that bought something, or met a
// final answer (sold out), is not.
func TestTokenIsRefundedWhenTheEngineIsBusy(t *testing.T) {
	v := refundingVerifier{tokenFunc: acceptToken, refunded: make(chan string, 4)}
	e := newEdge(t, withOptions(WithTokenVerifier(v)))
	for _, tc := range []struct {
		name   string
		err    error
		status int
		refund bool
	}{
		{"busy", engine.ErrBusy, 503, true},
		{"queued", nil, 200, false},
		{"sold out", stock.ErrSoldOut, 410, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.eng.answer(func(r *engine.Request) (engine.Ticket, error) {
				if tc.err != nil {
					return engine.Ticket{Remaining: 3}, fmt.Errorf("x: %w", tc.err)
				}
				return engine.Ticket{RequestNo: "1", Remaining: 3}, nil
			})
			user := map[string]string{"busy": "5", "queued": "6", "sold out": "7"}[tc.name]
			tok := "ok-" + user + "-8"
			r := e.order(user, `{"skuId":2001,"token":"`+tok+`"}`)
			if r.status != tc.status {
				t.Fatalf("status %d %s, want %d", r.status, r.raw, tc.status)
			}
			select {
			case got := <-v.refunded:
				if !tc.refund || got != tok {
					t.Fatalf("refunded %q, want refund %v of %q", got, tc.refund, tok)
				}
			default:
				if tc.refund {
					t.Fatal("no refund after the engine's busy answer")
				}
			}
		})
	}
}
