package engine

import (
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"seckill/catalog"
	"seckill/sale"
	"seckill/stock"
)

// The sidecar protocol is one HTTP/1.1 request per occupy over a local
// socket, pipelined by fasthttp's PipelineClient:
//
//	POST /occupy   body "activity,sku,user,quantity,traceId"
//	200            body "CODE,requestNo,remaining,retryAfterMs"
//
// The edge resolved the attempt (Request.Activity and .SKU); its resolution
// travels as the two ids, never as prices or shard choices: the server maps
// them to its own catalog's entries by exact lookup (Catalog.Lookup, never
// "the SKU's current activity": the edge chose already). A pair its catalog
// does not know is an activity created since its last refresh, or nonsense:
// the server reloads its catalog (one reload per catalogReloadGap, shared by
// every miss) and answers UNKNOWN_SKU if the pair is still unknown. A body
// that is not five fields, ids or a quantity that are not positive, are
// refused with 400 before any lookup.
//
// CODE is an occupy outcome's wire code from the table in stock/outcome.go
// (OK, NOT_OPEN, ENDED, SOLD_OUT, DUPLICATE, OVER_LIMIT, RATE_LIMITED,
// MISSING — Redis lost the SKU's state: stock.ErrStateLost, a kind of busy
// —, UNKNOWN_SKU or BUSY); a code the client does not know is busy too.
// retryAfterMs is Ticket.RetryAfter in milliseconds (RATE_LIMITED: when
// the user × SKU window lets the buyer try again; 0 otherwise); the client
// also reads an answer without it (a sidecar older than the field). GET
// /healthz answers 200 while the engine takes requests.

// Listen opens a listener for an address "unix:///path.sock" or
// "tcp://host:port" (a bare "host:port" means tcp). A stale unix socket file
// is removed first, and the socket is created with mode 0600: only this
// user (the edge runs as it) may connect.
func Listen(addr string) (net.Listener, error) {
	network, a := splitAddr(addr)
	if network != "unix" {
		return net.Listen(network, a)
	}
	if err := os.Remove(a); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", a, err)
	}
	// The umask makes the socket 0600 from its creation, so no peer can
	// connect in the moment before a chmod; the chmod states it for any
	// umask the process had.
	umaskMu.Lock()
	old := syscall.Umask(0o177)
	ln, err := net.Listen(network, a)
	syscall.Umask(old)
	umaskMu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(a, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod socket %s: %w", a, err)
	}
	return ln, nil
}

var umaskMu sync.Mutex

func splitAddr(addr string) (network, a string) {
	switch {
	case strings.HasPrefix(addr, "unix://"):
		return "unix", strings.TrimPrefix(addr, "unix://")
	case strings.HasPrefix(addr, "tcp://"):
		return "tcp", strings.TrimPrefix(addr, "tcp://")
	}
	return "tcp", addr
}

// Server serves an Engine over the sidecar protocol.
type Server struct {
	eng     Engine
	cat     *catalog.Catalog
	timeout time.Duration // bounds a catalog reload: engine.occupy_timeout
	log     *zap.Logger
	srv     *fasthttp.Server
	tls     *tls.Config // nil: plain
	auth    []byte      // "Bearer <secret>"; nil: no secret
	reload  catalogReload
}

// NewServer wraps eng. cat is this process's catalog, in which the ids on
// the wire are looked up; cfg is the engine section: occupy_timeout bounds a
// reload of cat after a miss, sidecar_secret is the bearer secret every
// call must carry (none: none), sidecar_tls_cert and _key make it serve TLS,
// sidecar_tls_ca with them makes it require a client certificate that CA
// signed, sidecar_read/write/idle_timeout bound its connections. The error
// is a TLS pair or CA that does not load.
func NewServer(eng Engine, cat *catalog.Catalog, cfg Config, log *zap.Logger) (*Server, error) {
	s := &Server{eng: eng, cat: cat, timeout: cfg.OccupyTimeout, log: log}
	if cfg.SidecarSecret != "" {
		s.auth = []byte("Bearer " + cfg.SidecarSecret)
	}
	if cfg.SidecarTLSCert != "" {
		pair, err := tls.LoadX509KeyPair(cfg.SidecarTLSCert, cfg.SidecarTLSKey)
		if err != nil {
			return nil, fmt.Errorf("engine.sidecar_tls_cert and engine.sidecar_tls_key: %w", err)
		}
		s.tls = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
		if cfg.SidecarTLSCA != "" {
			pool, err := loadCA(cfg.SidecarTLSCA)
			if err != nil {
				return nil, err
			}
			s.tls.ClientCAs, s.tls.ClientAuth = pool, tls.RequireAndVerifyClientCert
		}
	}
	s.srv = &fasthttp.Server{
		Handler:                       s.handle,
		Name:                          "seckill-engine",
		NoDefaultServerHeader:         true,
		NoDefaultContentType:          true,
		DisableHeaderNamesNormalizing: true,
		MaxRequestBodySize:            1024,
		ReadTimeout:                   cfg.SidecarReadTimeout,
		WriteTimeout:                  cfg.SidecarWriteTimeout,
		IdleTimeout:                   cfg.SidecarIdleTimeout,
		Concurrency:                   64 * 1024,
		Logger:                        zap.NewStdLog(log),
	}
	return s, nil
}

// Serve serves ln (over TLS when configured) until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}
	return s.srv.Serve(ln)
}

// Shutdown stops taking connections and waits for in-flight calls.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.ShutdownWithContext(ctx) }

func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	defer func() {
		// A panic answers 500 and is logged; the sidecar lives on.
		if v := recover(); v != nil {
			s.log.Error("sidecar handler panicked", zap.ByteString("path", ctx.Path()), zap.Any("panic", v), zap.StackSkip("stack", 1))
			ctx.ResetBody()
			ctx.SetStatusCode(fasthttp.StatusInternalServerError)
		}
	}()
	if s.auth != nil && subtle.ConstantTimeCompare(ctx.Request.Header.Peek(fasthttp.HeaderAuthorization), s.auth) != 1 {
		ctx.SetStatusCode(fasthttp.StatusUnauthorized)
		ctx.SetBodyString("sidecar secret required")
		return
	}
	path := ctx.Path()
	if string(path) == "/healthz" {
		ctx.SetBodyString("ok")
		return
	}
	if string(path) != "/occupy" || !ctx.IsPost() {
		ctx.SetStatusCode(fasthttp.StatusNotFound)
		return
	}
	var w wireRequest
	if err := parseOccupy(ctx.PostBody(), &w); err != nil {
		ctx.SetStatusCode(fasthttp.StatusBadRequest)
		ctx.SetBodyString(err.Error())
		return
	}
	// Not ctx: the engine derives timeouts from it whose timers may fire
	// after this handler returned, when fasthttp is already reusing the
	// RequestCtx for the next request (a data race). The engine bounds
	// every step itself (occupy_timeout, send_timeout).
	t, err := Ticket{Remaining: -1}, error(stock.ErrUnknownSKU)
	if a, k, ok := s.lookup(w.activity, w.sku); ok {
		r := Request{Activity: a, SKU: k, UserID: w.user, Quantity: w.quantity, TraceID: w.traceID}
		t, err = s.eng.Occupy(context.Background(), &r)
	}
	code := stock.OutcomeOf(err).Wire()
	b := ctx.Response.BodyWriter()
	var buf [128]byte
	out := append(buf[:0], code...)
	out = append(out, ',')
	out = append(out, t.RequestNo...)
	out = append(out, ',')
	out = strconv.AppendInt(out, t.Remaining, 10)
	out = append(out, ',')
	out = strconv.AppendInt(out, t.RetryAfter.Milliseconds(), 10)
	_, _ = b.Write(out)
}

// lookup maps the ids of the edge's resolution to this process's catalog
// entries. A miss reloads the catalog (or waits for the reload in flight)
// and looks again.
func (s *Server) lookup(activity, sku int64) (*sale.Activity, *sale.SKU, bool) {
	if a, k, ok := s.cat.Lookup(activity, sku); ok {
		return a, k, true
	}
	// The edge knew the pair (it resolved it from a catalog), so this
	// catalog is the stale one: an activity created since the last refresh.
	s.reload.run(s.cat, s.timeout)
	return s.cat.Lookup(activity, sku)
}

// catalogReloadGap spaces the reloads misses trigger, so a flood of
// unknown pairs costs Redis at most one catalog read per gap.
const catalogReloadGap = 250 * time.Millisecond

// catalogReload makes the callers that miss at the same moment share one
// reload: the first starts it, the others wait for it. Only the miss path
// takes its lock.
type catalogReload struct {
	mu   sync.Mutex
	done chan struct{} // the reload in flight, nil when none
	last time.Time     // when the last reload ended
}

// run reloads cat (bounded by timeout), or waits for the reload in flight;
// a reload that ended within the gap counts as fresh enough.
func (rl *catalogReload) run(cat *catalog.Catalog, timeout time.Duration) {
	rl.mu.Lock()
	if ch := rl.done; ch != nil {
		rl.mu.Unlock()
		<-ch
		return
	}
	if time.Since(rl.last) < catalogReloadGap {
		rl.mu.Unlock()
		return
	}
	ch := make(chan struct{})
	rl.done = ch
	rl.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	_ = cat.Load(ctx) // failing, the pair stays unknown: UNKNOWN_SKU
	cancel()
	rl.mu.Lock()
	rl.done, rl.last = nil, time.Now()
	rl.mu.Unlock()
	close(ch)
}

// wireRequest is an occupy request as the wire carries it: the edge's
// resolution as ids.
type wireRequest struct {
	activity, sku, user, quantity int64
	traceID                       string
}

// parseOccupy reads "activity,sku,user,quantity,traceId"; every id and the
// quantity must be positive (the edge always resolves an activity).
func parseOccupy(b []byte, w *wireRequest) error {
	var f [5][]byte
	for i := 0; i < 4; i++ {
		j := bytes.IndexByte(b, ',')
		if j < 0 {
			return errors.New("want activity,sku,user,quantity,traceId")
		}
		f[i], b = b[:j], b[j+1:]
	}
	f[4] = b
	var err error
	dst := []*int64{&w.activity, &w.sku, &w.user, &w.quantity}
	for i, d := range dst {
		if *d, err = parseInt(f[i]); err != nil {
			return err
		}
	}
	if w.activity <= 0 || w.sku <= 0 || w.user <= 0 || w.quantity <= 0 {
		return errors.New("ids and quantity must be positive")
	}
	w.traceID = string(f[4])
	return nil
}

func parseInt(b []byte) (int64, error) {
	if len(b) == 0 || len(b) > 18 {
		return 0, errors.New("bad number")
	}
	var n int64
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, errors.New("bad number")
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, nil
}

// ClientConfig shapes the sidecar client.
type ClientConfig struct {
	// Timeout bounds one call; past it the edge answers busy. Default 5s
	// (above the engine's own occupy + send timeouts).
	Timeout time.Duration
	// Conns is the number of pipelined connections. Default 4.
	Conns int
	// BreakAfter consecutive failures open the circuit for Cooldown, during
	// which calls fail at once with ErrBusy; then one probe goes through.
	// Defaults 5 and 1s.
	BreakAfter int
	Cooldown   time.Duration
	// Secret is sent on every call as "Authorization: Bearer <secret>"
	// (engine.sidecar_secret of the sidecar). Default none.
	Secret string
	// TLS, if set, makes the client speak TLS with it (the server name is
	// the address's host when the config names none; ClientTLS builds it
	// from the configuration). Default nil.
	TLS *tls.Config
}

// Client calls a sidecar engine. It implements Engine. Safe for concurrent
// use.
type Client struct {
	pc       *fasthttp.PipelineClient
	cfg      ClientConfig
	auth     string // "Bearer <secret>", or ""
	fails    atomic.Int64
	openTill atomic.Int64 // unix nanos; circuit open before this
	probing  atomic.Bool
}

// NewClient returns a client for addr ("unix:///path.sock", "tcp://host:port").
func NewClient(addr string, cfg ClientConfig) *Client {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Conns <= 0 {
		cfg.Conns = 4
	}
	if cfg.BreakAfter <= 0 {
		cfg.BreakAfter = 5
	}
	if cfg.Cooldown <= 0 {
		cfg.Cooldown = time.Second
	}
	network, a := splitAddr(addr)
	c := &Client{cfg: cfg}
	if cfg.Secret != "" {
		c.auth = "Bearer " + cfg.Secret
	}
	dial := func(string) (net.Conn, error) { return net.DialTimeout(network, a, time.Second) }
	if cfg.TLS != nil {
		tc := cfg.TLS.Clone()
		if tc.ServerName == "" {
			if host, _, err := net.SplitHostPort(a); err == nil {
				tc.ServerName = host
			}
		}
		dial = func(string) (net.Conn, error) {
			conn, err := net.DialTimeout(network, a, time.Second)
			if err != nil {
				return nil, err
			}
			tconn := tls.Client(conn, tc)
			_ = tconn.SetDeadline(time.Now().Add(time.Second))
			if err := tconn.Handshake(); err != nil {
				conn.Close()
				return nil, err
			}
			_ = tconn.SetDeadline(time.Time{})
			return tconn, nil
		}
	}
	c.pc = &fasthttp.PipelineClient{
		Addr:               a,
		Dial:               dial,
		MaxConns:           cfg.Conns,
		MaxPendingRequests: 16 * 1024,
		ReadTimeout:        cfg.Timeout,
		WriteTimeout:       cfg.Timeout,
	}
	return c
}

var errCircuitOpen = fmt.Errorf("%w: engine sidecar unavailable (circuit open)", ErrBusy)

// Occupy implements Engine over the socket: r's resolution travels as the
// activity and SKU ids.
func (c *Client) Occupy(ctx context.Context, r *Request) (Ticket, error) {
	t := Ticket{Remaining: -1}
	if !r.resolved() {
		return t, errUnresolved
	}
	if r.Quantity < 1 {
		return t, ErrBadQuantity
	}
	now := time.Now().UnixNano()
	if till := c.openTill.Load(); now < till {
		return t, errCircuitOpen
	} else if till != 0 {
		// Half-open: one probe at a time.
		if !c.probing.CompareAndSwap(false, true) {
			return t, errCircuitOpen
		}
		defer c.probing.Store(false)
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("/occupy")
	req.Header.SetHost("engine")
	if c.auth != "" {
		req.Header.Set(fasthttp.HeaderAuthorization, c.auth)
	}
	var buf [128]byte
	body := strconv.AppendInt(buf[:0], r.Activity.ID, 10)
	body = append(body, ',')
	body = strconv.AppendInt(body, r.SKU.ID, 10)
	body = append(body, ',')
	body = strconv.AppendInt(body, r.UserID, 10)
	body = append(body, ',')
	body = strconv.AppendInt(body, r.Quantity, 10)
	body = append(body, ',')
	body = append(body, r.TraceID...)
	req.SetBodyRaw(body)
	deadline := time.Now().Add(c.cfg.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	err := c.pc.DoDeadline(req, resp, deadline)
	if err == nil && resp.StatusCode() != fasthttp.StatusOK {
		err = fmt.Errorf("engine sidecar answered %d: %s", resp.StatusCode(), resp.Body())
	}
	if err != nil {
		if c.fails.Add(1) >= int64(c.cfg.BreakAfter) {
			c.openTill.Store(time.Now().Add(c.cfg.Cooldown).UnixNano())
		}
		return t, fmt.Errorf("%w: %w", ErrBusy, err)
	}
	c.fails.Store(0)
	c.openTill.Store(0)
	return decodeTicket(resp.Body())
}

func decodeTicket(b []byte) (Ticket, error) {
	t := Ticket{Remaining: -1}
	parts := bytes.SplitN(b, []byte{','}, 4)
	if len(parts) < 3 {
		return t, fmt.Errorf("%w: engine sidecar answered %q", ErrBusy, b)
	}
	t.RequestNo = string(parts[1])
	t.Remaining, _ = parseInt(parts[2])
	if len(parts) == 4 {
		ms, _ := parseInt(parts[3])
		t.RetryAfter = time.Duration(max(ms, 0)) * time.Millisecond
	}
	// BUSY carries no cause over the wire: it is answered with the code.
	if o, ok := stock.OutcomeOfWire(string(parts[0])); ok && o != stock.Busy {
		return t, o.Err()
	}
	return t, fmt.Errorf("%w: engine sidecar answered %s", ErrBusy, parts[0])
}

// Close closes idle connections.
func (c *Client) Close() {}
