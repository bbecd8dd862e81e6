package edge

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"syscall"
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

// TestSlowClientsAreCutOffByTheTimeouts holds the public listener's swept
// deadlines to the three timeouts: a client that sends half a request, one
// that idles on a kept-alive connection, and one that sends requests but
// reads none of the answers are each closed within a second of their
// timeout, and not before it.
func TestSlowClientsAreCutOffByTheTimeouts(t *testing.T) {
	const read, write, idle = 300 * time.Millisecond, 300 * time.Millisecond, 500 * time.Millisecond
	e := newEdge(t, withConfig(func(c *Config) { c.ReadTimeout, c.WriteTimeout, c.IdleTimeout = read, write, idle }))
	addr := serveTCP(t, e)
	// closedAfter is how long after start the server closed c (a read
	// returns EOF or a reset; any answer bytes before that are read).
	closedAfter := func(c net.Conn, start time.Time) time.Duration {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 4096)
		for {
			if _, err := c.Read(buf); err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Fatalf("the server kept the connection open for 10s")
				}
				return time.Since(start)
			}
		}
	}
	within := func(what string, took, timeout time.Duration) {
		t.Helper()
		if took < timeout || took > timeout+time.Second {
			t.Errorf("%s: closed after %v, want within a second after its timeout %v", what, took, timeout)
		}
	}

	t.Run("half a request", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: e")); err != nil {
			t.Fatal(err)
		}
		within("half a request", closedAfter(c, start), read)
	})
	t.Run("idle", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if r := rawRequest(t, c, healthReq); r.StatusCode() != 200 {
			t.Fatalf("healthz: %d", r.StatusCode())
		}
		within("idle", closedAfter(c, time.Now()), idle)
	})
	t.Run("reads no answer", func(t *testing.T) {
		// A small receive window: the server's writes block soon.
		d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			return rc.Control(func(fd uintptr) {
				_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
			})
		}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		reqs := []byte(strings.Repeat(healthReq, 64))
		start := time.Now()
		for time.Since(start) < 10*time.Second {
			_ = c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
			if _, err := c.Write(reqs); err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					continue // the server stopped reading: its writes are blocked
				}
				break // closed
			}
		}
		if took := time.Since(start); took >= 10*time.Second {
			t.Fatal("the server kept a client that reads nothing for 10s")
		} else {
			// Its writes blocked once the buffers filled (at once: the
			// window is small), and it closed a write timeout after.
			within("reads no answer", took, write)
		}
	})
}
