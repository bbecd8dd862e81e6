package benchkit

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"seckill/internal/testenv"
)

// Proc is a child process a bench tool started (a testenv.Proc: Name names
// it in messages, Log holds its output), stopped by its PID.
type Proc struct {
	*testenv.Proc
}

// procs are all children still running, stopped in reverse order by StopAll.
var (
	procsMu sync.Mutex
	procs   []*Proc
)

// Start runs bin with args and this process' environment plus env, its
// output in dir/name.log. The child gets SIGTERM if the tool dies first.
func Start(dir, name, bin string, env []string, args ...string) (*Proc, error) {
	logPath := filepath.Join(dir, name+".log")
	p := &Proc{Proc: &testenv.Proc{Name: name, Bin: bin, Args: args,
		Env: append(os.Environ(), env...), Log: logPath, DeathSignal: syscall.SIGTERM}}
	if err := p.Start(); err != nil {
		return nil, err
	}
	track(p)
	return p, nil
}

// track adds p to the children StopAll stops.
func track(p *Proc) {
	procsMu.Lock()
	procs = append(procs, p)
	procsMu.Unlock()
}

// StopWithin sends SIGTERM to p's PID, waits up to grace, then SIGKILL.
func (p *Proc) StopWithin(grace time.Duration) {
	if p.Stop(syscall.SIGTERM, grace) {
		fmt.Fprintf(os.Stderr, "bench: %s (pid %d) ignored SIGTERM for %v; killed it\n", p.Name, p.PID(), grace)
	}
	procsMu.Lock()
	for i, q := range procs {
		if q == p {
			procs = append(procs[:i], procs[i+1:]...)
			break
		}
	}
	procsMu.Unlock()
}

// StopAll stops every child still running, newest first, then every
// MariaDB StartMariaDB started and nobody stopped yet.
func StopAll() {
	procsMu.Lock()
	ps := append([]*Proc(nil), procs...)
	procsMu.Unlock()
	for i := len(ps) - 1; i >= 0; i-- {
		ps[i].StopWithin(40 * time.Second)
	}
	procsMu.Lock()
	ms := append([]*MariaDB(nil), marias...)
	procsMu.Unlock()
	for _, m := range ms {
		m.Stop() // once each: a MariaDB stopped before is left alone
	}
}

// WaitPort waits until addr accepts TCP connections or p exits.
func WaitPort(p *Proc, addr string, timeout time.Duration) error {
	return p.Await(timeout, "listening on "+addr, func() error {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// WaitReady waits until GET url answers 200 or p exits. A seckill process
// listens before it is ready: while it waits for its servers its listeners
// answer 503 (the start-up probe).
func WaitReady(p *Proc, url string, timeout time.Duration) error {
	c := &http.Client{Timeout: time.Second}
	return p.Await(timeout, url+" answering 200", func() error {
		resp, err := c.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	})
}

// FreeAddr is a free 127.0.0.1 port.
func FreeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// RaiseFileLimit lifts the soft open-file limit to the hard one. Setting it
// explicitly (rather than relying on the Go runtime's own raise) makes the
// children — wrk with 10,000 connections, the servers — inherit it.
func RaiseFileLimit() (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	l.Cur = l.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	return l.Cur, nil
}

// Main runs a bench tool named name: run, then cleanup, also on SIGINT or
// SIGTERM (exit 130); an error from run is printed with the name and
// exits 1.
func Main(name string, run func() error, cleanup func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sig
		fmt.Fprintf(os.Stderr, "%s: interrupted; stopping what it started\n", name)
		cleanup()
		os.Exit(130)
	}()
	err := run()
	cleanup()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}
