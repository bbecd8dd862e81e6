package chaos

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The seckill binary, built once per test binary.
var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

const binDirPrefix = "seckill-chaos-bin-"

// seckillBinary builds ./cmd/seckill the first time it is asked for, with
// -race: every process of the suite runs under the race detector, and a
// race it reports fails the scenario (System.raceReports). It lives in
// $TMPDIR/seckill-chaos-bin-<pid>;
// directories of test binaries that have ended are removed here, the next
// time the suite runs.
func seckillBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		removeStaleBinDirs()
		dir := filepath.Join(os.TempDir(), binDirPrefix+strconv.Itoa(os.Getpid()))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		binPath = filepath.Join(dir, "seckill")
		start := time.Now()
		cmd := exec.Command("go", "build", "-race", "-o", binPath, "./cmd/seckill")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build -race ./cmd/seckill: %v\n%s", err, out)
			return
		}
		fmt.Fprintf(os.Stderr, "chaos: built %s (-race) in %v\n", binPath, time.Since(start).Round(time.Millisecond))
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// removeStaleBinDirs removes our binary directories whose test binary no
// longer runs.
func removeStaleBinDirs() {
	ents, _ := os.ReadDir(os.TempDir())
	for _, e := range ents {
		pid, err := strconv.Atoi(strings.TrimPrefix(e.Name(), binDirPrefix))
		if !e.IsDir() || !strings.HasPrefix(e.Name(), binDirPrefix) || err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); errors.Is(err, os.ErrNotExist) {
			os.RemoveAll(filepath.Join(os.TempDir(), e.Name()))
		}
	}
}

// proc is one seckill process (or any command) that the harness starts,
// signals and starts again with the same arguments. Its output goes to a
// log file that survives restarts (each start is marked).
type proc struct {
	name    string
	bin     string
	args    []string
	env     []string
	logPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	err    error // exit status of the last run
	starts int
}

func newProc(t testing.TB, dir, name, bin string, args, env []string) *proc {
	p := &proc{name: name, bin: bin, args: args, env: env, logPath: filepath.Join(dir, name+".log")}
	t.Cleanup(func() { p.kill(syscall.SIGKILL) })
	return p
}

// start runs the process; it does not wait for readiness.
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("%s is running (pid %d)", p.name, p.cmd.Process.Pid)
		}
	}
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.starts++
	fmt.Fprintf(f, "\n===== chaos: start #%d of %s at %s: %s %s\n", p.starts, p.name,
		time.Now().Format(time.RFC3339Nano), filepath.Base(p.bin), strings.Join(p.args, " "))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = f, f
	// The process dies with the test binary, even on SIGKILL.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
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

// running reports whether the process is alive.
func (p *proc) running() bool {
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

// exited is closed when the current run ends (nil before the first start).
func (p *proc) exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// kill sends sig to the process (by its PID) and waits for it to exit; a
// process that ignores a gentle signal for grace is killed.
func (p *proc) kill(sig syscall.Signal) {
	p.stopWithin(sig, 30*time.Second)
}

func (p *proc) stopWithin(sig syscall.Signal, grace time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
	}
}

// lastErr is the exit status of the last run.
func (p *proc) lastErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// tail returns the last n lines of the process' log.
func (p *proc) tail(n int) string {
	b, err := os.ReadFile(p.logPath)
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

// grep counts the occurrences of s in the process's log.
func (p *proc) grep(s string) int {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte(s))
}

// waitFor polls ok every 50ms until it returns nil, the process exits, or d
// passes.
func (p *proc) waitFor(d time.Duration, what string, ok func() error) error {
	deadline := time.Now().Add(d)
	exited := p.exited()
	var err error
	for {
		if err = ok(); err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited (%v) before %s:\n%s", p.name, p.lastErr(), what, p.tail(40))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no %s after %v: %v\n%s", p.name, what, d, err, p.tail(40))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// errNotYet is what a waitFor condition answers while it does not hold yet.
var errNotYet = errors.New("not yet")
