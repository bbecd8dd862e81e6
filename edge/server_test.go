package edge

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// serveTCP serves e on a real loopback listener and returns its address.
func serveTCP(t *testing.T, e *edgeEnv) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = e.srv.Serve(ln) }()
	return ln.Addr().String()
}

// rawRequest writes req on c and reads one response.
func rawRequest(t *testing.T, c net.Conn, req string) *fasthttp.Response {
	t.Helper()
	if _, err := fmt.Fprint(c, req); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var resp fasthttp.Response
	if err := resp.Read(bufio.NewReader(c)); err != nil {
		t.Fatal(err)
	}
	return &resp
}

const healthReq = "GET /healthz HTTP/1.1\r\nHost: edge\r\n\r\n"

func TestConnectionsPerAddressAreCapped(t *testing.T) {
	e := newEdge(t, withConfig(func(c *Config) { c.MaxConnsPerIP = 2 }))
	addr := serveTCP(t, e)
	var open []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if r := rawRequest(t, c, healthReq); r.StatusCode() != 200 {
			t.Fatalf("connection %d: %d", len(open), r.StatusCode())
		}
		open = append(open, c)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if r := rawRequest(t, c, healthReq); r.StatusCode() != 429 {
		t.Fatalf("third connection from one address: %d %s, want 429", r.StatusCode(), r.Body())
	}
	// A closed connection frees its slot.
	open[0].Close()
	waitFor(t, "the slot to free", func() bool {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		defer c.Close()
		return rawRequest(t, c, healthReq).StatusCode() == 200
	})
}

func TestHeadersOverTheBufferAreRefused(t *testing.T) {
	e := newEdge(t)
	addr := serveTCP(t, e)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	big := strings.Repeat("a", 8192)
	r := rawRequest(t, c, "POST /api/v1/flash-sale/order HTTP/1.1\r\nHost: edge\r\nX-User-Id: 5\r\nX-Pad: "+big+"\r\nContent-Length: 2\r\n\r\n{}")
	if r.StatusCode() != 431 || !strings.Contains(string(r.Body()), `"BAD_REQUEST"`) {
		t.Fatalf("got %d %s, want 431", r.StatusCode(), r.Body())
	}
	if e.eng.calls.Load() != 0 {
		t.Fatal("the engine was called")
	}
}
