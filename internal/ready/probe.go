package ready

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Probe serves the HTTP listeners of a process that is still starting, so
// that an orchestrator sees it alive but not ready, and a buyer who reaches
// it is refused at once instead of hanging in the listen backlog:
//
//	GET /healthz  200 {"code":"OK","message":"alive"}
//	GET /readyz   503 {"code":"NOT_READY","message":"starting: waiting for redis.default"}
//	anything else 503 {"code":"BUSY","message":"starting: waiting for redis.default"}, Retry-After: 1
//
// Every answer closes its connection, so no client keeps one to the probe.
// Stop hands the listeners, still open, to the process's own servers.
type Probe struct {
	srvs []*http.Server
	lns  []*handoff
	wg   sync.WaitGroup
	once sync.Once
}

// deadliner is a listener whose Accept can be woken without closing it
// (*net.TCPListener, *net.UnixListener).
type deadliner interface {
	net.Listener
	SetDeadline(time.Time) error
}

// Serve starts the probe on every listener given (nil ones are skipped).
// A listener whose Accept cannot be interrupted without closing it (not
// TCP or unix) is left alone: its connections wait until the process
// serves it.
func Serve(st *Status, lns ...net.Listener) *Probe {
	p := &Probe{}
	h := handler(st)
	for _, ln := range lns {
		d, ok := ln.(deadliner)
		if !ok {
			continue
		}
		ho := &handoff{deadliner: d}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 2 * time.Second, IdleTimeout: time.Second}
		srv.SetKeepAlivesEnabled(false)
		p.srvs = append(p.srvs, srv)
		p.lns = append(p.lns, ho)
		p.wg.Go(func() { _ = srv.Serve(ho) })
	}
	return p
}

// Stop ends the probe: its connections are closed, and every listener is
// left open and ready to Accept again. Safe to call more than once.
func (p *Probe) Stop() {
	p.once.Do(func() {
		for _, srv := range p.srvs {
			_ = srv.Close() // closes the handoffs (not the listeners) and the probe's connections
		}
		p.wg.Wait()
		for _, ho := range p.lns {
			_ = ho.deadliner.SetDeadline(time.Time{})
		}
	})
}

// handoff lends a listener to the probe: its Close only wakes a blocked
// Accept (a deadline in the past) and makes it report net.ErrClosed.
type handoff struct {
	deadliner
	closed atomic.Bool
}

func (h *handoff) Accept() (net.Conn, error) {
	c, err := h.deadliner.Accept()
	if h.closed.Load() {
		// A client that connected at the very moment of the handover
		// loses this connection; it was not ready to be served anyway.
		if err == nil {
			c.Close()
		}
		return nil, net.ErrClosed
	}
	return c, err
}

func (h *handoff) Close() error {
	if h.closed.Swap(true) {
		return nil
	}
	return h.deadliner.SetDeadline(time.Unix(1, 0))
}

func handler(st *Status) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/healthz" {
			writeJSON(w, http.StatusOK, "OK", "alive")
			return
		}
		msg := "starting"
		if names := st.Waiting(); len(names) > 0 {
			msg = "starting: waiting for " + strings.Join(names, ", ")
		}
		if r.URL.Path == "/readyz" {
			writeJSON(w, http.StatusServiceUnavailable, "NOT_READY", msg)
			return
		}
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, "BUSY", msg)
	})
}

func writeJSON(w http.ResponseWriter, status int, code, msg string) {
	b, _ := json.Marshal(struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}{code, msg})
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
