package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Redis is a redis-server child process on a free loopback port.
type Redis struct {
	Addr string
	Dir  string
	Port int
	Args []string // extra server arguments it was started with
	cmd  *exec.Cmd
}

// RedisOption changes how StartRedis starts the server.
type RedisOption func(*Redis)

// WithRedisArgs adds redis-server command-line arguments, e.g.
// "--appendonly", "yes".
func WithRedisArgs(args ...string) RedisOption {
	return func(r *Redis) { r.Args = append(r.Args, args...) }
}

// StartRedis starts a redis-server without persistence (unless options say
// otherwise) and stops it when the test ends.
func StartRedis(t testing.TB, opts ...RedisOption) *Redis {
	t.Helper()
	r := &Redis{Dir: t.TempDir(), Port: FreePort(t)}
	for _, o := range opts {
		o(r)
	}
	if err := r.Start(); err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(r.Stop)
	return r
}

// Start (re)starts the server on the same port and directory.
func (r *Redis) Start() error {
	bin, err := lookBinary("redis-server")
	if err != nil {
		return fmt.Errorf("redis-server is required by the tests (apt-get install -y redis-server, or make test): %w", err)
	}
	r.Addr = fmt.Sprintf("127.0.0.1:%d", r.Port)
	args := []string{"--port", itoa(r.Port), "--bind", "127.0.0.1", "--dir", r.Dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "no",
		"--logfile", filepath.Join(r.Dir, "redis.log")}
	args = append(args, r.Args...)
	r.cmd = exec.Command(bin, args...)
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	if err := waitTCP(r.Addr, 10*time.Second); err != nil {
		log, _ := os.ReadFile(filepath.Join(r.Dir, "redis.log"))
		return fmt.Errorf("redis-server: %v\n%s", err, log)
	}
	return nil
}

// Stop kills the server (SIGKILL: no save on exit) and waits for it.
func (r *Redis) Stop() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.cmd = nil
}

// Client returns a rueidis client to the server, closed when the test ends.
func (r *Redis) Client(t testing.TB) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr}, DisableCache: true})
	if err != nil {
		t.Fatalf("rueidis client to %s: %v", r.Addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

// Do runs one command on a fresh connection and returns the reply; a test
// convenience for inspecting state.
func (r *Redis) Do(t testing.TB, args ...string) rueidis.RedisResult {
	t.Helper()
	c := r.Client(t)
	return c.Do(context.Background(), c.B().Arbitrary(args...).Build())
}
