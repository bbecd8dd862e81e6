package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"seckill/internal/testenv"
)

// proc is a child process the harness started (a testenv.Proc); it is
// stopped by its PID. The harness reads its CPU time from /proc by pid().
type proc struct {
	*testenv.Proc
	name string
	log  string
}

// procs are all children still running, stopped in reverse order at exit.
var (
	procsMu sync.Mutex
	procs   []*proc
)

// start runs bin with args and our environment plus env, its output in
// dir/name.log. The child gets SIGTERM if the harness dies first.
func start(dir, name, bin string, env []string, args ...string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	p := &proc{name: name, log: logPath, Proc: &testenv.Proc{Name: name, Bin: bin, Args: args,
		Env: append(os.Environ(), env...), Log: logPath, DeathSignal: syscall.SIGTERM}}
	if err := p.Start(); err != nil {
		return nil, err
	}
	procsMu.Lock()
	procs = append(procs, p)
	procsMu.Unlock()
	return p, nil
}

// pid is the child's process id.
func (p *proc) pid() int { return p.PID() }

// stop sends SIGTERM to p's PID, waits up to grace, then SIGKILL.
func (p *proc) stop(grace time.Duration) {
	if p.Stop(syscall.SIGTERM, grace) {
		fmt.Fprintf(os.Stderr, "harness: %s (pid %d) ignored SIGTERM for %v; killed it\n", p.name, p.PID(), grace)
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

// stopAll stops every child still running, newest first.
func stopAll() {
	procsMu.Lock()
	ps := append([]*proc(nil), procs...)
	procsMu.Unlock()
	for i := len(ps) - 1; i >= 0; i-- {
		ps[i].stop(40 * time.Second)
	}
}

// waitPort waits until addr accepts TCP connections or p exits.
func waitPort(p *proc, addr string, timeout time.Duration) error {
	return p.Await(timeout, "listening on "+addr, func() error {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// waitReady waits until GET url answers 200 or p exits. A seckill process
// listens before it is ready: while it waits for its servers its listeners
// answer 503 (the start-up probe).
func waitReady(p *proc, url string, timeout time.Duration) error {
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

// freeAddr is a free 127.0.0.1 port.
func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// raiseFileLimit lifts the soft open-file limit to the hard one. Setting it
// explicitly (rather than relying on the Go runtime's own raise) makes the
// children — wrk with 10,000 connections, the servers — inherit it.
func raiseFileLimit() (uint64, error) {
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
