package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
	// Username and Password are what Client, Do and the start-up probe
	// authenticate with (WithRedisPassword, WithRedisACL); empty: none.
	Username, Password string
	// TLS is the server's TLS (WithRedisTLS): Addr then speaks TLS only.
	TLS     *RedisTLS
	aclFile string
	cmd     *exec.Cmd
	done    chan struct{} // closed when cmd has exited

	// doers is Do's one connection per test (closed when the test ends),
	// so that a test polling with Do does not open a connection a call.
	doMu  sync.Mutex
	doers map[testing.TB]rueidis.Client
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
	r := &Redis{Dir: t.TempDir()}
	for _, o := range opts {
		o(r)
	}
	r.prepare(t)
	// FreePort's port is free when asked, not necessarily when
	// redis-server binds it: another test binary's server or an outgoing
	// connection may take it in between. Start then fails (the server
	// exits, or a server that is not ours answers), and another port is
	// tried.
	var err error
	for range 5 {
		r.Port = FreePort(t)
		if err = r.Start(); err == nil {
			break
		}
	}
	if err != nil {
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
	args = append(args, r.authArgs()...)
	args = append(args, r.Args...)
	r.cmd = exec.Command(bin, args...)
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		r.cmd = nil
		return fmt.Errorf("start redis-server: %w", err)
	}
	cmd, done := r.cmd, make(chan struct{})
	r.done = done
	go func() { _ = cmd.Wait(); close(done) }()
	if err := r.waitOurs(10 * time.Second); err != nil {
		r.Stop()
		log, _ := os.ReadFile(filepath.Join(r.Dir, "redis.log"))
		return fmt.Errorf("redis-server on %s: %v\n%s", r.Addr, err, log)
	}
	return nil
}

// waitOurs waits until the server we started answers on r.Addr: INFO
// names our process. A server that exits (the port was taken) or another
// server on the port is an error at once.
func (r *Redis) waitOurs(d time.Duration) error {
	deadline := time.Now().Add(d)
	pid := r.cmd.Process.Pid
	for {
		select {
		case <-r.done:
			return fmt.Errorf("redis-server exited at start (port %d taken?)", r.Port)
		default:
		}
		got, err := r.infoPID()
		switch {
		case err == nil && got == pid:
			return nil
		case err == nil:
			return fmt.Errorf("another redis-server (pid %d) answers on port %d", got, r.Port)
		case time.Now().After(deadline):
			return fmt.Errorf("not ready after %v: %w", d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// infoPID asks the Redis server on r.Addr for its process id (INFO
// server), over TLS and after AUTH where r has them.
func (r *Redis) infoPID() (int, error) {
	c, err := r.dial(200 * time.Millisecond)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	br := bufio.NewReader(c)
	if err := r.auth(c, br); err != nil {
		return 0, err
	}
	if _, err := c.Write([]byte("*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")); err != nil {
		return 0, err
	}
	head, err := br.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if !strings.HasPrefix(head, "$") {
		return 0, fmt.Errorf("INFO: %q", strings.TrimSpace(head)) // e.g. -LOADING
	}
	n, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("INFO: %q", strings.TrimSpace(head))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(br, body); err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO server without process_id")
}

// Stop kills the server (SIGKILL: no save on exit) and waits for it.
func (r *Redis) Stop() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.done
	r.cmd = nil
}

// Client returns a rueidis client to the server, closed when the test ends.
func (r *Redis) Client(t testing.TB) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(r.ClientOption())
	if err != nil {
		t.Fatalf("rueidis client to %s: %v", r.Addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

// Do runs one command on the test's own connection (opened by its first
// Do, closed when the test ends) and returns the reply; a test convenience
// for inspecting and setting up state. A Redis error reply or a broken
// connection fails the test; a nil reply does not (it is returned, for
// callers that expect one).
func (r *Redis) Do(t testing.TB, args ...string) rueidis.RedisResult {
	t.Helper()
	c := r.doer(t)
	res := c.Do(context.Background(), c.B().Arbitrary(args...).Build())
	if err := res.Error(); err != nil && !rueidis.IsRedisNil(err) {
		if _, isReply := rueidis.IsRedisErr(err); !isReply {
			// The connection broke (a restarted server): once more on a
			// new one, as a fresh connection per call would have.
			c = r.renewDoer(t)
			res = c.Do(context.Background(), c.B().Arbitrary(args...).Build())
		}
	}
	if err := res.Error(); err != nil && !rueidis.IsRedisNil(err) {
		t.Fatalf("redis %s %v: %v", r.Addr, args, err)
	}
	return res
}

// doer is t's connection for Do.
func (r *Redis) doer(t testing.TB) rueidis.Client {
	t.Helper()
	r.doMu.Lock()
	defer r.doMu.Unlock()
	if c, ok := r.doers[t]; ok {
		return c
	}
	c := r.Client(t)
	if r.doers == nil {
		r.doers = map[testing.TB]rueidis.Client{}
	}
	r.doers[t] = c
	t.Cleanup(func() {
		r.doMu.Lock()
		delete(r.doers, t)
		r.doMu.Unlock()
	})
	return c
}

// renewDoer replaces t's connection for Do by a new one.
func (r *Redis) renewDoer(t testing.TB) rueidis.Client {
	t.Helper()
	c := r.Client(t)
	r.doMu.Lock()
	if r.doers == nil {
		r.doers = map[testing.TB]rueidis.Client{}
	}
	r.doers[t] = c
	r.doMu.Unlock()
	return c
}

// Int runs one command and returns its integer reply (an integer, or a
// string that holds one, as GET returns); any error — a nil reply of a key
// that does not exist among them — fails the test, so a renamed key never
// reads as zero.
func (r *Redis) Int(t testing.TB, args ...string) int64 {
	t.Helper()
	n, err := r.Do(t, args...).AsInt64()
	if err != nil {
		t.Fatalf("redis %s %v: integer reply: %v", r.Addr, args, err)
	}
	return n
}

// Str runs one command and returns its string reply; any error, a nil reply
// among them, fails the test.
func (r *Redis) Str(t testing.TB, args ...string) string {
	t.Helper()
	s, err := r.Do(t, args...).ToString()
	if err != nil {
		t.Fatalf("redis %s %v: string reply: %v", r.Addr, args, err)
	}
	return s
}
