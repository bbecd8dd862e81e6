package main

import (
	"errors"
	"net"
	"net/http"
	"net/http/pprof"

	"go.uber.org/zap"
)

var errPprofNotLoopback = errors.New("--pprof must name a loopback address")

// servePprof serves net/http/pprof on addr (loopback only: profiles show
// internals) until the process exits. Empty addr serves nothing. The bench
// harness profiles `seckill dev` under load through it.
func servePprof(addr string, log *zap.Logger) error {
	if addr == "" {
		return nil
	}
	ln, err := listen(addr)
	if err != nil {
		return err
	}
	if host, _, _ := net.SplitHostPort(ln.Addr().String()); !net.ParseIP(host).IsLoopback() {
		ln.Close()
		return errPprofNotLoopback
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go func() {
		if err := http.Serve(ln, mux); err != nil {
			log.Warn("pprof listener stopped", zap.Error(err))
		}
	}()
	log.Info("pprof listening", zap.String("addr", ln.Addr().String()))
	return nil
}
