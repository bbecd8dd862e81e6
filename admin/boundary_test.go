package admin

import (
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestPublicPagesAreAPathNotAPrefix: the page shell under /admin/ui is served
// without the token, but a path that only starts with those letters
// (/admin/uiX) needs it like every other admin path.
func TestPublicPagesAreAPathNotAPrefix(t *testing.T) {
	s := New("right-token", Deps{}, zap.NewNop())
	page := func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("page") }
	s.Router().GET("/admin/ui", page)
	s.Router().GET("/admin/ui/{file}", page)
	s.Router().GET("/admin/uiX", page) // a route a later change might add
	s.Router().GET("/admin/ui-data", page)
	s.ServePublic("/admin/ui")
	for _, c := range []struct {
		route string
		want  int
	}{
		{"GET /admin/ui", fasthttp.StatusOK},
		{"GET /admin/ui/oncall.js", fasthttp.StatusOK},
		{"GET /admin/uiX", fasthttp.StatusUnauthorized},
		{"GET /admin/ui-data", fasthttp.StatusUnauthorized},
		{"POST /admin/ui", fasthttp.StatusUnauthorized},
	} {
		t.Run(c.route, func(t *testing.T) {
			if got := call(s, c.route, "").Response.StatusCode(); got != c.want {
				t.Fatalf("%s without a token: %d, want %d", c.route, got, c.want)
			}
		})
	}
	if got := call(s, "GET /admin/uiX", "Bearer right-token").Response.StatusCode(); got != fasthttp.StatusOK {
		t.Fatalf("GET /admin/uiX with the token: %d", got)
	}
}

// TestAPanickingHandlerAnswers500AndTheListenerLives: over a real listener,
// a handler that panics answers 500 with a log line, and the next call on
// the same server is served.
func TestAPanickingHandlerAnswers500AndTheListenerLives(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	s := New("right-token", Deps{}, zap.New(core))
	s.Router().GET("/admin/v1/boom", func(*fasthttp.RequestCtx) { panic("boom") })
	s.Router().GET("/admin/v1/fine", func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("fine") })
	ln := fasthttputil.NewInmemoryListener()
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.srv.Shutdown() })
	c := &fasthttp.Client{Dial: func(string) (net.Conn, error) { return ln.Dial() }}
	get := func(path string) (int, string) {
		t.Helper()
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI("http://admin" + path)
		req.Header.Set("Authorization", "Bearer right-token")
		if err := c.DoTimeout(req, resp, 5*time.Second); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return resp.StatusCode(), string(resp.Body())
	}
	if code, body := get("/admin/v1/boom"); code != fasthttp.StatusInternalServerError {
		t.Fatalf("a panicking handler answered %d %s, want 500", code, body)
	}
	if n := logs.FilterMessage("admin handler panicked").Len(); n != 1 {
		t.Fatalf("%d panic log lines, want 1", n)
	}
	if n := logs.FilterMessage("admin call").FilterField(zap.Int("status", 500)).Len(); n != 1 {
		t.Fatalf("the panicking call has %d audit lines with status 500, want 1", n)
	}
	if code, body := get("/admin/v1/fine"); code != fasthttp.StatusOK || body != "fine" {
		t.Fatalf("after the panic: %d %s", code, body)
	}
}
