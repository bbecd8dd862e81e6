package testenv

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is a child process that a test (or the bench harness) starts,
// signals by its PID and may start again with the same arguments. Its
// output goes to one log file: the first start truncates it, every start
// appends a marker line (StartMarker) before the process's own output, so
// the file holds every run. Proc needs no *testing.T: the bench harness, a
// plain program, uses it too. Its methods are safe for concurrent use.
type Proc struct {
	Name string   // for messages and the start marker
	Bin  string   // the executable
	Args []string // its arguments
	Env  []string // its whole environment; nil inherits ours
	Log  string   // the log file's path
	// DeathSignal is what the kernel sends the child when our process dies
	// (Pdeathsig), so no child outlives a killed test binary; 0 means
	// SIGKILL.
	DeathSignal syscall.Signal
	// Group starts the process as the leader of a process group of its
	// own, so that KillGroup (and a Stop that runs out of grace) reaches
	// its children too, as a crash of the box would.
	Group bool

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when the current run has ended
	err    error         // exit status of the last run that ended
	starts int
}

// StartMarker begins the line Start writes to the log before each run.
const StartMarker = "===== start #"

// Start runs the process; it does not wait for it to be ready (see Await).
// Starting a process that still runs is an error.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("%s is running (pid %d)", p.Name, p.cmd.Process.Pid)
		}
	}
	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if p.starts == 0 {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(p.Log, flags, 0o644)
	if err != nil {
		return err
	}
	p.starts++
	fmt.Fprintf(f, "%s%d of %s at %s: %s %s\n", StartMarker, p.starts, p.Name,
		time.Now().Format(time.RFC3339Nano), filepath.Base(p.Bin), strings.Join(p.Args, " "))
	cmd := exec.Command(p.Bin, p.Args...)
	cmd.Env = p.Env
	cmd.Stdout, cmd.Stderr = f, f
	sig := p.DeathSignal
	if sig == 0 {
		sig = syscall.SIGKILL
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: sig, Setpgid: p.Group}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go func() {
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// PID is the process id of the current (or last) run, 0 before the first.
func (p *Proc) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Running reports whether the process is alive.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Exited is closed when the current run ends; nil (never ready) before the
// first start.
func (p *Proc) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// Err is the exit status of the last run that ended (nil: exit code 0).
func (p *Proc) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Stop sends sig to the process by its PID and waits for it to exit; one
// that is still there after grace gets SIGKILL. It reports whether SIGKILL
// was needed. A process that is not running is left alone.
func (p *Proc) Stop(sig syscall.Signal, grace time.Duration) (killed bool) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
		return false
	case <-time.After(grace):
		p.kill(cmd)
		<-done
		return sig != syscall.SIGKILL
	}
}

// KillGroup sends SIGKILL to the process's whole group (Group) — or to
// the process alone without one — and waits for the process to exit.
func (p *Proc) KillGroup() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	p.kill(cmd)
	<-done
}

func (p *Proc) kill(cmd *exec.Cmd) {
	if p.Group {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return
	}
	_ = cmd.Process.Kill()
}

// Await polls check until it returns nil. It fails at once when the process
// exits first, and after timeout otherwise; either error names what was
// awaited, check's last error and the log's last lines.
func (p *Proc) Await(timeout time.Duration, what string, check func() error) error {
	exited := p.Exited()
	if exited == nil {
		return fmt.Errorf("%s: awaiting %s before its first start", p.Name, what)
	}
	err := poll(timeout, exited, check)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errGaveUp):
		return fmt.Errorf("%s exited (%v) before %s (log %s):\n%s", p.Name, p.Err(), what, p.Log, p.Tail(40))
	default:
		return fmt.Errorf("%s: no %s after %v: %v (log %s):\n%s", p.Name, what, timeout, err, p.Log, p.Tail(40))
	}
}

// Tail returns the last n lines of the log.
func (p *Proc) Tail(n int) string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return err.Error()
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// SinceStart is the log from the last start marker on.
func (p *Proc) SinceStart() string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return ""
	}
	s := string(b)
	if i := strings.LastIndex(s, StartMarker); i >= 0 {
		return s[i:]
	}
	return s
}

// Count counts the occurrences of s in the whole log (every run).
func (p *Proc) Count(s string) int {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte(s))
}
