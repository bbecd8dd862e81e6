package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// A Redis that restarts on a large dataset answers LOADING until it has
// read it. Tests produce that state for real: the dataset is written out
// (BGREWRITEAOF or SAVE) so that loading reads it key by key, and the
// server is started again with key-load-delay (a redis-server debugging
// setting, microseconds per key; negative -N sleeps one microsecond every
// N keys) and a small loading-process-events-interval-bytes, so that it
// answers clients — with LOADING — while it loads for about as long as the
// test asks.

// FillDB is the database Fill writes to: none of the project's parts uses
// it, so the filler only makes loading take longer.
const FillDB = 15

// Fill writes n filler keys of size bytes each into database FillDB.
func (r *Redis) Fill(t testing.TB, n, size int) {
	t.Helper()
	if err := r.fill(0, n, size); err != nil {
		t.Fatal(err)
	}
}

// fill writes filler keys from..to-1.
func (r *Redis) fill(from, to, size int) error {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr}, DisableCache: true, SelectDB: FillDB, ForceSingleClient: true})
	if err != nil {
		return fmt.Errorf("fill %s: %w", r.Addr, err)
	}
	defer c.Close()
	val := strings.Repeat("x", size)
	const batch = 1000
	for i := from; i < to; i += batch {
		cmd := c.B().Mset().KeyValue()
		for j := i; j < min(i+batch, to); j++ {
			cmd = cmd.KeyValue("fill:"+strconv.Itoa(j), val)
		}
		if err := c.Do(context.Background(), cmd.Build()).Error(); err != nil {
			return fmt.Errorf("fill %s: %w", r.Addr, err)
		}
	}
	return nil
}

// Shutdown stops the server with SIGTERM and waits for it: with the
// append-only file on, it is written out first (a clean restart). Killed
// after 10s.
func (r *Redis) Shutdown() {
	if r.proc != nil {
		r.proc.Stop(syscall.SIGTERM, 10*time.Second)
	}
}

// RestartLoading writes the dataset out (BGREWRITEAOF with the append-only
// file on, SAVE otherwise), stops the server cleanly and starts it again on
// the same port and files, loading slowly enough that it answers LOADING
// for about d. It returns once the new server answers (INFO works while it
// loads); Loading reports when loading ends. Later restarts (Start) load
// at full speed again.
func (r *Redis) RestartLoading(d time.Duration) error {
	keys, err := r.Persist()
	if err != nil {
		return err
	}
	// The server sleeps between keys without answering anyone: a few
	// large keys would leave clients hanging rather than answered LOADING.
	// Filler keys spread the delay thinly.
	if need := int(d / maxKeyDelay); keys < need {
		if err := r.fill(keys, need, 64); err != nil {
			return err
		}
		if keys, err = r.Persist(); err != nil {
			return err
		}
	}
	r.Shutdown()
	saved := r.Args
	r.Args = append(append([]string(nil), saved...), SlowLoadArgs(d, keys)...)
	err = r.Start()
	r.Args = saved
	return err
}

// SlowLoadArgs are the redis-server arguments that make loading a dataset
// of keys keys (as Persist writes it) take about d, answering LOADING to
// clients meanwhile.
func SlowLoadArgs(d time.Duration, keys int) []string {
	return []string{"--key-load-delay", strconv.Itoa(loadDelay(d, keys)), "--loading-process-events-interval-bytes", "1024"}
}

// maxKeyDelay is the longest pause between two keys RestartLoading lets
// the server take.
const maxKeyDelay = time.Millisecond

// loadDelay is the key-load-delay that makes loading keys keys take about
// d: sleeping costs about 63µs more than asked on this kind of machine
// (usleep(1) takes ~63µs), so small delays sleep 1µs every N keys.
func loadDelay(d time.Duration, keys int) int {
	const overhead = 63 * time.Microsecond
	if keys <= 0 {
		keys = 1
	}
	per := d / time.Duration(keys)
	switch {
	case per >= 2*overhead:
		return int((per - overhead) / time.Microsecond)
	case per >= overhead:
		return 1
	case per <= 0:
		return -1000
	default:
		return -int(overhead / per)
	}
}

// Persist writes the dataset out so that a restart loads it key by key
// (BGREWRITEAOF, which leaves an RDB base, with the append-only file on;
// SAVE otherwise) and returns its number of keys over every database.
func (r *Redis) Persist() (int, error) {
	info, err := r.info("persistence")
	if err != nil {
		return 0, err
	}
	cmd := []string{"SAVE"}
	if info["aof_enabled"] == "1" {
		cmd = []string{"BGREWRITEAOF"}
	}
	if _, err := r.command(cmd...); err != nil {
		return 0, fmt.Errorf("%s on %s: %w", cmd[0], r.Addr, err)
	}
	if cmd[0] == "BGREWRITEAOF" {
		deadline := time.Now().Add(30 * time.Second)
		for {
			info, err := r.info("persistence")
			if err != nil {
				return 0, err
			}
			if info["aof_rewrite_in_progress"] == "0" && info["aof_rewrite_scheduled"] == "0" {
				if s := info["aof_last_bgrewrite_status"]; s != "ok" {
					return 0, fmt.Errorf("BGREWRITEAOF on %s: %s", r.Addr, s)
				}
				break
			}
			if time.Now().After(deadline) {
				return 0, fmt.Errorf("BGREWRITEAOF on %s: still running after 30s", r.Addr)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	ks, err := r.info("keyspace")
	if err != nil {
		return 0, err
	}
	n := 0
	for db, v := range ks {
		if !strings.HasPrefix(db, "db") {
			continue
		}
		// db0:keys=12,expires=0,avg_ttl=0
		k, _, _ := strings.Cut(strings.TrimPrefix(v, "keys="), ",")
		c, err := strconv.Atoi(k)
		if err != nil {
			return 0, fmt.Errorf("INFO keyspace %s: %q", db, v)
		}
		n += c
	}
	return n, nil
}

// Loading reports whether the server is still loading its dataset (INFO
// persistence loading:1).
func (r *Redis) Loading() (bool, error) {
	info, err := r.info("persistence")
	if err != nil {
		return false, err
	}
	return info["loading"] == "1", nil
}

// WaitLoaded waits until the server has loaded its dataset, at most d.
func (r *Redis) WaitLoaded(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		l, err := r.Loading()
		if err == nil && !l {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s still loading after %v (%v)", r.Addr, d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// info runs INFO section on a fresh connection (INFO answers while the
// server loads) and returns its fields.
func (r *Redis) info(section string) (map[string]string, error) {
	body, err := r.command("INFO", section)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, l := range strings.Split(body, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), ":"); ok {
			out[k] = v
		}
	}
	return out, nil
}

// command is Command on this server.
func (r *Redis) command(args ...string) (string, error) { return Command(r.Addr, args...) }

// Command sends one command to the redis-server at addr over a fresh
// connection and returns a status or bulk string reply; an error reply is
// an error. A raw connection, not rueidis: a loading server refuses the
// client's handshake, and a tool that pauses a server (CLIENT PAUSE) needs
// no client of its own.
func Command(addr string, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c, b.String()); err != nil {
		return "", err
	}
	br := bufio.NewReader(c)
	head, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	head = strings.TrimRight(head, "\r\n")
	switch {
	case strings.HasPrefix(head, "+"):
		return head[1:], nil
	case strings.HasPrefix(head, "-"):
		return "", errors.New(head[1:])
	case strings.HasPrefix(head, "$"):
		n, err := strconv.Atoi(head[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("%s: reply %q", args[0], head)
		}
		body := make([]byte, n+2)
		if _, err := io.ReadFull(br, body); err != nil {
			return "", err
		}
		return string(body[:n]), nil
	}
	return "", fmt.Errorf("%s: reply %q", args[0], head)
}
