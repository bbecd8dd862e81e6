package edge

import (
	"testing"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"
)

// A panic in a handler is a 500 and a log line; the process and the
// connection go on serving.
func TestPanicInAHandlerIs500AndTheNextRequestWorks(t *testing.T) {
	e := newEdge(t, withOptions(WithRoutes(func(r *router.Router) {
		r.GET("/boom", func(*fasthttp.RequestCtx) { panic("boom") })
	})))
	if r := e.do("GET", "/boom", "", ""); r.status != 500 || r.code() != "INTERNAL" {
		t.Fatalf("panicking handler: %d %s, want 500", r.status, r.raw)
	}
	if r := e.order("42", `{"skuId":1001}`); r.status != 200 {
		t.Fatalf("the next request: %d %s", r.status, r.raw)
	}
}

// A panic in the checks before routing (here the blocklist, reached for
// every buyer address) is recovered the same way.
func TestPanicBeforeRoutingIs500(t *testing.T) {
	e := newEdge(t)
	saved := e.srv.admit.block
	e.srv.admit.block = nil // a nil blocklist panics in addr
	r := e.doVia(e.from("203.0.113.9"), "GET", "/api/v1/flash-sale/activities/7", "", "")
	e.srv.admit.block = saved
	if r.status != 500 {
		t.Fatalf("panic before routing: %d %s, want 500", r.status, r.raw)
	}
	if r := e.doVia(e.from("203.0.113.9"), "GET", "/api/v1/flash-sale/activities/7", "", ""); r.status != 200 {
		t.Fatalf("the next request: %d %s", r.status, r.raw)
	}
}

// Order and token bodies must be JSON: a cross-site form post is 415.
func TestOrderBodyMustBeJSON(t *testing.T) {
	e := newEdge(t)
	send := func(path, ct string) response {
		req := fasthttp.AcquireRequest()
		resp := fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.Header.SetMethod("POST")
		req.SetRequestURI("http://edge" + path)
		req.Header.Set("X-User-Id", "42")
		if ct != "" {
			req.Header.SetContentType(ct)
		}
		req.SetBodyString(`{"activityId":7,"skuId":1001}`)
		if err := e.client.Do(req, resp); err != nil {
			t.Fatal(err)
		}
		return response{status: resp.StatusCode(), raw: string(resp.Body())}
	}
	for _, c := range []struct {
		ct     string
		status int
	}{
		{"application/json", 200},
		{"application/json; charset=utf-8", 200},
		{"Application/JSON;charset=UTF-8", 200},
		{"application/x-www-form-urlencoded", 415},
		{"text/plain", 415},
		{"multipart/form-data; boundary=x", 415},
		{"application/jsonp", 415},
		{"", 415},
	} {
		for _, path := range []string{"/api/v1/flash-sale/order", "/api/seckill/submit"} {
			if r := send(path, c.ct); r.status != c.status {
				t.Errorf("%s with Content-Type %q: %d %s, want %d", path, c.ct, r.status, r.raw, c.status)
			}
		}
	}
	if r := send("/api/v1/flash-sale/token", "text/plain"); r.status != 415 {
		t.Errorf("token with text/plain: %d %s, want 415", r.status, r.raw)
	}
}
