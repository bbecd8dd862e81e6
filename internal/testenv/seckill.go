package testenv

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The seckill binary, for the rigs that run it as a process: the fault
// suite, the restart and soak tools. Its flags and its start banner are
// what the README documents.

// ModuleRoot is the repository's root directory (where go.mod is).
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// BuildSeckill builds ./cmd/seckill into out (race: with -race) from the
// module root.
func BuildSeckill(out string, race bool) error {
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/seckill")...)
	cmd.Dir = ModuleRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %v ./cmd/seckill: %v\n%s", args, err, b)
	}
	return nil
}

// Dev is one `seckill dev` — the edge, engine and consumer in one process
// with its own redis-servers, broker and SQLite file — as a Proc leading a
// process group of its own, so that KillGroup takes its redis-server
// children down with it, as a crash of the box would.
type Dev struct {
	*Proc
	Edge string // the edge's host:port (its /readyz tells readiness)

	mu    sync.Mutex
	redis [2]string // the default and hot redis-servers of the current run
}

// NewDev makes (does not start) `bin dev args...` with its output in log;
// edge is the --listen address args give it. env is its whole environment
// (nil: ours).
func NewDev(bin, log, edge string, args, env []string) *Dev {
	return &Dev{Edge: edge, Proc: &Proc{Name: "seckill dev", Bin: bin, Args: append([]string{"dev"}, args...), Env: env, Log: log,
		DeathSignal: syscall.SIGKILL, Group: true}}
}

var devBannerRedis = regexp.MustCompile(`redis\s+(\S+) \(default\), (\S+) \(hot shard\)`)

// AwaitReady waits until the edge's /readyz answers 200, then reads the
// redis-servers' addresses from the banner seckill dev prints once it is
// up; it returns the time /readyz took. It gives up when the process
// exits or timeout passes.
func (d *Dev) AwaitReady(timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	c := &http.Client{Timeout: time.Second}
	err := d.Await(timeout, "/readyz 200", func() error {
		resp, err := c.Get("http://" + d.Edge + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz %d", resp.StatusCode)
		}
		return nil
	})
	took := time.Since(start)
	if err != nil {
		return took, err
	}
	err = d.Await(timeout-took, "the redis addresses in its banner", func() error {
		m := devBannerRedis.FindStringSubmatch(d.SinceStart())
		if m == nil {
			return errNotThere
		}
		d.mu.Lock()
		d.redis = [2]string{m[1], m[2]}
		d.mu.Unlock()
		return nil
	})
	return took, err
}

var errNotThere = fmt.Errorf("not there yet")

// Redis is the default and the hot redis-server's addresses of the current
// run (known once AwaitReady returned).
func (d *Dev) Redis() [2]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.redis
}

// KillGroup SIGKILLs the process group (seckill dev and its
// redis-servers) and waits until the servers' ports are closed.
func (d *Dev) KillGroup() {
	d.Proc.KillGroup()
	d.awaitRedisGone()
}

// Stop sends sig to seckill dev (SIGTERM: it drains and stops its
// servers), kills the group if it has not exited within grace, and waits
// until its redis-servers' ports are closed. It reports whether the kill
// was needed.
func (d *Dev) Stop(sig syscall.Signal, grace time.Duration) bool {
	killed := d.Proc.Stop(sig, grace)
	d.awaitRedisGone()
	return killed
}

func (d *Dev) awaitRedisGone() {
	for _, a := range d.Redis() {
		for i := 0; a != "" && i < 500; i++ {
			c, err := net.DialTimeout("tcp", a, 200*time.Millisecond)
			if err != nil {
				break
			}
			c.Close()
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// CleanEnv is this process' environment without SECKILL_* variables: every
// configuration key can be set by SECKILL_ + its path, so that nothing
// from the caller's shell (or make's SECKILL_TEST_MYSQL_DSN) reaches the
// configuration of a seckill process a rig starts.
func CleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SECKILL_") {
			env = append(env, kv)
		}
	}
	return env
}
