package testenv

import (
	"context"
	"fmt"
	"path/filepath"
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
	TLS *RedisTLS
	// Log is the server's output, every run of it (Proc's log); default
	// redis.log in Dir.
	Log     string
	aclFile string
	proc    *Proc

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
// otherwise) in a directory of the test's and stops it when the test ends.
func StartRedis(t testing.TB, opts ...RedisOption) *Redis {
	t.Helper()
	r, err := LaunchRedis(t.TempDir(), opts...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(r.Stop)
	return r
}

// WithRedisLog puts the server's output in path instead of Dir/redis.log.
func WithRedisLog(path string) RedisOption {
	return func(r *Redis) { r.Log = path }
}

// LaunchRedis is StartRedis for a program (the bench tools): the server
// keeps its files in dir, and the caller stops it (Stop; it dies with the
// caller's process too).
func LaunchRedis(dir string, opts ...RedisOption) (*Redis, error) {
	r := &Redis{Dir: dir}
	for _, o := range opts {
		o(r)
	}
	if err := r.prepare(); err != nil {
		return nil, err
	}
	// freePort's port is free when asked, not necessarily when
	// redis-server binds it: another test binary's server or an outgoing
	// connection may take it in between. Start then fails (the server
	// exits, or a server that is not ours answers), and another port is
	// tried.
	var err error
	for range 5 {
		if r.Port, err = freePort(); err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		if err = r.Start(); err == nil {
			return r, nil
		}
	}
	return nil, err
}

// Start (re)starts the server on the same port and directory.
func (r *Redis) Start() error {
	bin, err := lookBinary("redis-server")
	if err != nil {
		return fmt.Errorf("redis-server is required by the tests (apt-get install -y redis-server, or make test): %w", err)
	}
	r.Addr = fmt.Sprintf("127.0.0.1:%d", r.Port)
	args := []string{"--port", itoa(r.Port), "--bind", "127.0.0.1", "--dir", r.Dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "no"}
	args = append(args, r.authArgs()...)
	args = append(args, r.Args...)
	if r.Log == "" {
		r.Log = filepath.Join(r.Dir, "redis.log")
	}
	if r.proc == nil {
		r.proc = &Proc{Name: "redis-server", Bin: bin, Log: r.Log}
	}
	r.proc.Args = args
	if err := r.proc.Start(); err != nil {
		return err
	}
	if err := r.waitOurs(10 * time.Second); err != nil {
		r.Stop()
		return fmt.Errorf("redis-server on %s: %v\n%s", r.Addr, err, r.proc.SinceStart())
	}
	return nil
}

// Proc is the server's process (nil before the first start): its PID, a
// gentle stop (SIGTERM writes the append-only file), its log.
func (r *Redis) Proc() *Proc { return r.proc }

// waitOurs waits until the server we started answers on r.Addr: INFO
// names our process. A server that exits (the port was taken) or another
// server on the port is an error at once.
func (r *Redis) waitOurs(d time.Duration) error {
	deadline := time.Now().Add(d)
	pid, exited := r.proc.PID(), r.proc.Exited()
	for {
		select {
		case <-exited:
			return fmt.Errorf("redis-server exited at start (port %d taken?)", r.Port)
		default:
		}
		got, err := r.pid()
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

// Stop kills the server (SIGKILL: no save on exit) and waits for it.
func (r *Redis) Stop() {
	if r.proc != nil {
		r.proc.Stop(syscall.SIGKILL, time.Minute)
	}
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
