package edge

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"seckill/catalog"
	"seckill/engine"
	"seckill/internal/identity"
	"seckill/internal/shard"
	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/stock"
	"seckill/stock/results"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The fixture sale: activity 7 sells SKUs 1001 and 1002 from saleStart for
// an hour; activity 8 (token required) sells 2001; activity 9, offline,
// sells 1003.
var (
	saleStart = time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)
	saleOpen  = saleStart.Add(time.Minute)
)

func fixture() []sale.Activity {
	return []sale.Activity{
		{ID: 7, Start: saleStart, End: saleStart.Add(time.Hour), State: sale.StateOnline,
			SKUs: []sale.SKU{{ID: 1001, Stock: 100, Price: 990, LimitPerUser: 1}, {ID: 1002, Stock: 5, Price: 12000, LimitPerUser: 2}}},
		{ID: 8, Start: saleStart, End: saleStart.Add(time.Hour), State: sale.StateOnline, RequireToken: true,
			SKUs: []sale.SKU{{ID: 2001, Stock: 10, Price: 100, LimitPerUser: 1}}},
		{ID: 9, Start: saleStart, End: saleStart.Add(time.Hour), State: sale.StateOffline,
			SKUs: []sale.SKU{{ID: 1003, Stock: 10, Price: 100, LimitPerUser: 1}}},
	}
}

// fakeEngine counts calls and answers with fn (default: a fresh ticket).
type fakeEngine struct {
	calls atomic.Int64
	mu    sync.Mutex
	fn    func(*engine.Request) (engine.Ticket, error)
	last  engine.Request
}

func (f *fakeEngine) Occupy(_ context.Context, r *engine.Request) (engine.Ticket, error) {
	n := f.calls.Add(1)
	f.mu.Lock()
	f.last = *r
	fn := f.fn
	f.mu.Unlock()
	if fn != nil {
		return fn(r)
	}
	return engine.Ticket{RequestNo: strconv.FormatInt(900000+n, 10), Remaining: 50}, nil
}

func (f *fakeEngine) answer(fn func(*engine.Request) (engine.Ticket, error)) {
	f.mu.Lock()
	f.fn = fn
	f.mu.Unlock()
}

func (f *fakeEngine) lastRequest() engine.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// testClock is a settable server clock.
type testClock struct{ ns atomic.Int64 }

func newTestClock(t time.Time) *testClock {
	c := &testClock{}
	c.set(t)
	return c
}
func (c *testClock) set(t time.Time) { c.ns.Store(t.UnixNano()) }
func (c *testClock) now() time.Time  { return time.Unix(0, c.ns.Load()) }

// edgeEnv is one edge over a real Redis, served on an in-memory listener.
type edgeEnv struct {
	t      testing.TB
	ln     *fasthttputil.InmemoryListener
	redis  *testenv.Redis
	rdb    rueidis.Client
	cat    *catalog.Catalog
	res    *results.Store
	hot    *testenv.Redis // the hot-SKU shard (withHotShard), else nil
	eng    *fakeEngine
	clock  *testClock
	reg    *prometheus.Registry
	srv    *Server
	client *fasthttp.Client
}

type envOption func(*envConfig)

type envConfig struct {
	cfg   Config
	opts  []Option
	redis *testenv.Redis
	clock bool // WithClock(testClock); default true
	acts  []sale.Activity
	log   *zap.Logger // default zaptest
	hot   bool        // a hot-SKU shard of its own (withHotShard)
}

func withConfig(f func(*Config)) envOption { return func(c *envConfig) { f(&c.cfg) } }
func withOptions(o ...Option) envOption    { return func(c *envConfig) { c.opts = append(c.opts, o...) } }
func withRedis(r *testenv.Redis) envOption { return func(c *envConfig) { c.redis = r } }
func withLogger(l *zap.Logger) envOption   { return func(c *envConfig) { c.log = l } }

// withActivities puts more activities before the edge starts (a Put racing
// the edge's first catalog load could be overwritten by it).
func withActivities(a ...sale.Activity) envOption {
	return func(c *envConfig) { c.acts = append(c.acts, a...) }
}
func withRealClock() envOption { return func(c *envConfig) { c.clock = false } }

// withHotShard gives the edge's results a hot-SKU shard of their own, a
// second redis-server: a result lives on the shard of its SKU, routed as
// the app routes it (stock.Stock.Client over the catalog).
func withHotShard() envOption { return func(c *envConfig) { c.hot = true } }

// unlimited is the default configuration without its rate limits: tests
// of other behaviour send far more than a buyer would. Limit tests set
// the layer they test with withConfig.
func unlimited() Config {
	c := DefaultConfig()
	c.Rate = RateConfig{MaxKeys: c.Rate.MaxKeys}
	c.Identity = identity.ModeAny // the identity modes have their own tests
	return c
}

// newEdge starts an edge; the fixture activities are put into the
// catalog unless the Redis is shared (then the first edge did it).
func newEdge(t testing.TB, opts ...envOption) *edgeEnv {
	t.Helper()
	ec := envConfig{cfg: unlimited(), clock: true}
	for _, o := range opts {
		o(&ec)
	}
	e := &edgeEnv{t: t, eng: &fakeEngine{}, clock: newTestClock(saleOpen), reg: prometheus.NewRegistry()}
	e.redis = ec.redis
	if e.redis == nil {
		e.redis = testenv.StartRedis(t)
	}
	e.rdb = e.redis.Client(t)
	e.cat = catalog.New(e.rdb)
	if ec.redis == nil {
		for _, a := range append(fixture(), ec.acts...) {
			if err := e.cat.Put(context.Background(), a); err != nil {
				t.Fatalf("put activity %d: %v", a.ID, err)
			}
		}
	} else if err := e.cat.Load(context.Background()); err != nil {
		t.Fatalf("load catalog: %v", err)
	}
	if ec.hot {
		e.hot = testenv.StartRedis(t)
		sc := shard.DefaultConfig()
		sc.Default.Addrs, sc.Hot = []string{e.redis.Addr}, shard.HotShards{{Addrs: []string{e.hot.Addr}}}
		set, err := shard.Open(sc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(set.Close)
		e.res = results.New(e.rdb, stock.New(set, e.cat).BucketClient, time.Hour)
	} else {
		e.res = results.New(e.rdb, nil, time.Hour)
	}
	all := ec.opts
	if ec.clock {
		all = append([]Option{WithClock(e.clock.now)}, all...)
	}
	log := ec.log
	if log == nil {
		log = zaptest.NewLogger(t)
	}
	srv, err := New(ec.cfg, e.eng, e.cat, e.res, e.rdb, log, e.reg, all...)
	if err != nil {
		t.Fatalf("edge.New: %v", err)
	}
	e.srv = srv
	ln := fasthttputil.NewInmemoryListener()
	e.ln = ln
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	e.client = &fasthttp.Client{Dial: func(string) (net.Conn, error) { return ln.Dial() }}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return e
}

// response is a decoded answer.
type response struct {
	status int
	header map[string]string // canonical names
	raw    string
	body   map[string]any
}

func (r response) code() string { s, _ := r.body["code"].(string); return s }

// do sends one request; user "" sends no X-User-Id. The in-memory
// connection has no IP peer, so the address checks do not apply: see
// from.
func (e *edgeEnv) do(method, path, user, body string) response {
	e.t.Helper()
	return e.doVia(e.client, method, path, user, body)
}

// from returns a client whose connections come from the TCP peer addr
// ("203.0.113.7", "::1").
func (e *edgeEnv) from(addr string) *fasthttp.Client {
	peer := &net.TCPAddr{IP: net.ParseIP(addr), Port: 40000}
	return &fasthttp.Client{Dial: func(string) (net.Conn, error) { return e.ln.DialWithLocalAddr(peer) }}
}

// doVia sends one request through c; headers are name, value pairs.
func (e *edgeEnv) doVia(c *fasthttp.Client, method, path, user, body string, headers ...string) response {
	e.t.Helper()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI("http://edge" + path)
	if user != "" {
		req.Header.Set("X-User-Id", user)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	if body != "" {
		req.Header.SetContentType("application/json")
		req.SetBodyString(body)
	}
	if err := c.DoTimeout(req, resp, 5*time.Second); err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	r := response{status: resp.StatusCode(), raw: string(resp.Body())}
	r.header = map[string]string{}
	for k, v := range resp.Header.All() {
		r.header[string(k)] = string(v)
	}
	if len(resp.Body()) > 0 && string(resp.Header.ContentType()) == "application/json" {
		if err := json.Unmarshal(resp.Body(), &r.body); err != nil {
			e.t.Fatalf("%s %s: body %q: %v", method, path, resp.Body(), err)
		}
	}
	return r
}

func (e *edgeEnv) order(user, body string) response {
	e.t.Helper()
	return e.do("POST", "/api/v1/flash-sale/order", user, body)
}

// waitFor is testenv.Eventually with the edge tests' 5s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, what, 5*time.Second, cond)
}

func (e *edgeEnv) waitSubscribed() {
	e.t.Helper()
	waitFor(e.t, "events subscription", e.srv.subscribed.Load)
}

// publish sends an event as the engine would.
func (e *edgeEnv) publish(ev sale.Event) {
	e.t.Helper()
	if ev.At == 0 {
		ev.At = time.Now().UnixNano()
	}
	if err := e.rdb.Do(context.Background(), e.rdb.B().Publish().Channel(sale.EventsChannel).Message(ev.String()).Build()).Error(); err != nil {
		e.t.Fatalf("publish: %v", err)
	}
}
