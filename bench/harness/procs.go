package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// proc is a child process the harness started; it is stopped by its PID.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// procs are all children still running, stopped in reverse order at exit.
var (
	procsMu sync.Mutex
	procs   []*proc
)

// start runs bin with args, its output in dir/name.log. The child gets
// SIGTERM if the harness dies first.
func start(dir, name, bin string, env []string, args ...string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() { _ = cmd.Wait(); f.Close(); close(p.done) }()
	procsMu.Lock()
	procs = append(procs, p)
	procsMu.Unlock()
	return p, nil
}

// stop sends SIGTERM to p's PID, waits up to grace, then SIGKILL.
func (p *proc) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		fmt.Fprintf(os.Stderr, "harness: %s (pid %d) ignored SIGTERM for %v; killing it\n", p.name, p.cmd.Process.Pid, grace)
		_ = p.cmd.Process.Kill()
		<-p.done
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

// exited reports whether p is gone.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
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
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if p != nil && p.exited() {
			return fmt.Errorf("%s exited before listening on %s (see %s)", p.name, addr, p.log)
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not listen on %s within %v", p.name, addr, timeout)
}

// waitReady waits until GET url answers 200 or p exits. A seckill process
// listens before it is ready: while it waits for its servers its listeners
// answer 503 (the start-up probe).
func waitReady(p *proc, url string, timeout time.Duration) error {
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	last := "no answer"
	for time.Now().Before(deadline) {
		if p.exited() {
			return fmt.Errorf("%s exited before %s answered 200 (see %s)", p.name, url, p.log)
		}
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s: %s not 200 within %v (last: %s)", p.name, url, timeout, last)
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
