package admin

import (
	"regexp"
	"sort"
	"testing"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// routes lists every registered admin route as "METHOD path", with its
// parameters filled in.
func routes(t *testing.T, s *Server) []string {
	t.Helper()
	param := regexp.MustCompile(`\{([a-zA-Z]+)(:\*)?\}`)
	var out []string
	for method, paths := range s.Router().List() {
		for _, p := range paths {
			out = append(out, method+" "+param.ReplaceAllString(p, "1"))
		}
	}
	sort.Strings(out)
	if len(out) < 14 {
		t.Fatalf("only %d admin routes registered: %v", len(out), out)
	}
	return out
}

func call(s *Server, route, auth string) *fasthttp.RequestCtx {
	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	method, path, _ := cut(route)
	req.Header.SetMethod(method)
	req.SetRequestURI(path)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.SetBodyString(`{"state":"OFFLINE"}`)
	ctx.Init(&req, nil, nil)
	s.Handler()(&ctx)
	return &ctx
}

func cut(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// TestEveryRouteRefusesWithoutTheToken walks the router itself, so a route
// added later is covered without editing this test. The handlers are never
// reached (the dependencies are nil: reaching one would panic).
func TestEveryRouteRefusesWithoutTheToken(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	s := New("right-token", Deps{}, zap.New(core))
	empty := New("", Deps{}, zap.New(core))
	cases := []struct {
		name string
		srv  *Server
		auth string
	}{
		{"no Authorization header", s, ""},
		{"a wrong token", s, "Bearer wrong-token"},
		{"a token that only starts right", s, "Bearer right-token-and-more"},
		{"a prefix of the token", s, "Bearer right"},
		{"the bearer scheme without a token", s, "Bearer "},
		{"the token without the bearer scheme", s, "right-token"},
		{"the token under another scheme", s, "Basic right-token"},
		{"the right token on a server whose token is unset", empty, "Bearer "},
	}
	for _, route := range routes(t, s) {
		for _, c := range cases {
			t.Run(route+"/"+c.name, func(t *testing.T) {
				ctx := call(c.srv, route, c.auth)
				if ctx.Response.StatusCode() != 401 {
					t.Fatalf("got %d %s, want 401", ctx.Response.StatusCode(), ctx.Response.Body())
				}
				if len(ctx.Response.Header.Peek("WWW-Authenticate")) == 0 {
					t.Error("401 without WWW-Authenticate")
				}
			})
		}
	}
	// Every refusal is audit-logged.
	refused := logs.FilterMessage("admin call").FilterField(zap.Bool("authorized", false)).Len()
	if want := len(routes(t, s)) * len(cases); refused != want {
		t.Fatalf("%d refused calls in the audit log, want %d", refused, want)
	}
}

func TestBlocklistRoutesWithoutAStoreAnswerUnavailable(t *testing.T) {
	s := New("right-token", Deps{}, zap.NewNop())
	for _, route := range []string{"GET /admin/v1/blocklist", "PUT /admin/v1/blocklist/ips/10.0.0.0/8", "DELETE /admin/v1/blocklist/users/5"} {
		ctx := call(s, route, "Bearer right-token")
		if ctx.Response.StatusCode() != 503 {
			t.Errorf("%s: got %d %s, want 503", route, ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
}
