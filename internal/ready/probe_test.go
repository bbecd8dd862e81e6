package ready

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type reply struct {
	Status     int
	RetryAfter string
	Code       string `json:"code"`
	Message    string `json:"message"`
}

func get(t *testing.T, c *http.Client, url string) reply {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := reply{Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After")}
	if err := json.Unmarshal(b, &r); err != nil {
		r.Message = string(b)
	}
	return r
}

// TestProbeAnswersThenHandsOver: while the process starts, the probe says
// alive, not ready, and busy to buyers; after Stop the same listener —
// never closed — serves the process's own server.
func TestProbeAnswersThenHandsOver(t *testing.T) {
	for _, network := range []string{"tcp", "unix"} {
		t.Run(network, func(t *testing.T) {
			addr := "127.0.0.1:0"
			if network == "unix" {
				addr = filepath.Join(t.TempDir(), "p.sock")
			}
			ln, err := net.Listen(network, addr)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					return (&net.Dialer{}).DialContext(ctx, network, ln.Addr().String())
				},
			}}
			st := &Status{}
			st.Set("redis.default", "kafka")
			p := Serve(st, ln, nil)

			if r := get(t, c, "http://x/healthz"); r.Status != 200 || r.Code != "OK" {
				t.Errorf("/healthz while starting: %+v", r)
			}
			if r := get(t, c, "http://x/readyz"); r.Status != 503 || r.Code != "NOT_READY" || r.Message != "starting: waiting for redis.default, kafka" {
				t.Errorf("/readyz while starting: %+v", r)
			}
			st.done("redis.default")
			if r := get(t, c, "http://x/api/v1/flash-sale/result/1"); r.Status != 503 || r.Code != "BUSY" || r.RetryAfter != "1" || !strings.Contains(r.Message, "waiting for kafka") {
				t.Errorf("a buyer's request while starting: %+v", r)
			}
			p.Stop()
			p.Stop() // twice is harmless

			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, `{"code":"OK","message":"the real server"}`)
			})}
			go func() { _ = srv.Serve(ln) }()
			defer srv.Close()
			if r := get(t, c, "http://x/readyz"); r.Status != 200 || r.Message != "the real server" {
				t.Errorf("/readyz after the handover: %+v", r)
			}
		})
	}
}

func TestProbeStopsAtOnceWithoutClients(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p := Serve(nil, ln)
	start := time.Now()
	p.Stop()
	if d := time.Since(start); d > time.Second {
		t.Errorf("Stop took %v", d)
	}
	// The listener still accepts.
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Accept after Stop: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Accept after Stop never returned")
	}
}
