package devserver

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// ErrNoRedis means redis-server is not installed.
var ErrNoRedis = errors.New("redis-server not found: install it with `apt-get install -y redis-server` (make run does this)")

// Persistence returns how seckill dev's redis-servers keep their data —
// what docs/operations-ledger.md recommends for production too — as
// redis-server arguments (a fresh slice each call): the append-only file,
// fsynced every second (a crash loses at most ~1 s of writes, which
// reconciliation repairs), no separate RDB snapshots, and the file kept
// compact. A restart reads the whole file, so its length is the restart's.
// Redis 7 rewrites it in a forked child as an RDB image of the data, to
// which the commands since are appended, and an image loads two to three
// times faster than the commands that made it (bench/RESULTS.md,
// "Restarts and disk use"). Redis' own policy waits until the file reaches 64 MB — a
// hot shard's file stays all commands until about a million tickets — and
// then lets the commands grow as large as the image; here the first
// rewrite comes at 4 MB and the commands stay under half the image.
func Persistence() []string {
	return []string{
		"--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
		"--aof-use-rdb-preamble", "yes",
		"--auto-aof-rewrite-percentage", "50",
		"--auto-aof-rewrite-min-size", "4mb",
	}
}

// Redis is a redis-server child process.
type Redis struct {
	Addr string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartRedis runs redis-server on 127.0.0.1:port (0 picks a free port) with
// its files in dir and extra appended to its arguments (dev.redis_args),
// and waits until its port accepts connections. A server restarted on a
// large append-only file answers LOADING for a while after that: the
// process waits for it as for any Redis (internal/ready).
func StartRedis(dir string, port int, extra ...string) (*Redis, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if _, serr := os.Stat("/usr/bin/redis-server"); serr != nil {
			return nil, ErrNoRedis
		}
		bin = "/usr/bin/redis-server"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if port == 0 {
		if port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	r := &Redis{Addr: "127.0.0.1:" + strconv.Itoa(port), done: make(chan struct{})}
	r.cmd = exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--daemonize", "no", "--protected-mode", "no", "--logfile", filepath.Join(dir, "redis.log"))
	r.cmd.Args = append(append(r.cmd.Args, Persistence()...), extra...)
	// The child dies with us even on SIGKILL.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	go func() { _ = r.cmd.Wait(); close(r.done) }()
	if err := waitTCP(r.Addr, 10*time.Second, r.done); err != nil {
		r.Stop()
		log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
		return nil, fmt.Errorf("redis-server on %s: %v\n%s", r.Addr, err, log)
	}
	return r, nil
}

// Stop asks redis-server to exit (SIGTERM flushes the append-only file) and
// waits for it, killing it after 10s.
func (r *Redis) Stop() {
	if r == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}
