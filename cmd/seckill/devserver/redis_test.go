package devserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

func redisClient(t *testing.T, addr string) rueidis.Client {
	t.Helper()
	var (
		c   rueidis.Client
		err error
	)
	// A server reading its file answers LOADING until it has.
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err = rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
		if err == nil {
			if err = c.Do(context.Background(), c.B().Ping().Build()).Error(); err == nil {
				return c
			}
			c.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func info(t *testing.T, c rueidis.Client, field string) int64 {
	t.Helper()
	s, err := c.Do(context.Background(), c.B().Info().Section("persistence").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(s, "\r\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", field, v)
			}
			return n
		}
	}
	t.Fatalf("INFO persistence has no %s", field)
	return 0
}

// aofBytes is the size of the append-only files in dir.
func aofBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	ents, err := os.ReadDir(filepath.Join(dir, "appendonlydir"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

// TestRedisKeepsItsFileCompact: the append-only file of a Redis that
// rewrites the same thousand keys over and over (like a sale rewriting its
// counters and results) is rewritten into a compact image once it passes
// 4 MB, instead of growing with every write, and a restart reads back
// the last value of every key from it.
func TestRedisKeepsItsFileCompact(t *testing.T) {
	dir := t.TempDir()
	r, err := StartRedis(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	c := redisClient(t, r.Addr)
	ctx := context.Background()
	for param, want := range map[string]string{
		"appendonly": "yes", "appendfsync": "everysec", "save": "", "aof-use-rdb-preamble": "yes",
		"auto-aof-rewrite-percentage": "50", "auto-aof-rewrite-min-size": strconv.Itoa(4 << 20),
	} {
		got, err := c.Do(ctx, c.B().ConfigGet().Parameter(param).Build()).AsStrMap()
		if err != nil {
			t.Fatal(err)
		}
		if got[param] != want {
			t.Errorf("CONFIG GET %s = %q, want %q", param, got[param], want)
		}
	}

	// 24 rounds over 1,000 keys of ~1 KB: ~24 MB of commands for ~1 MB of
	// data.
	const keys, rounds = 1000, 24
	val := func(round, k int) string { return fmt.Sprintf("%04d-%06d-%s", round, k, strings.Repeat("v", 1000)) }
	for round := 0; round < rounds; round++ {
		cmds := make(rueidis.Commands, 0, keys)
		for k := 0; k < keys; k++ {
			cmds = append(cmds, c.B().Set().Key(fmt.Sprintf("k%d", k)).Value(val(round, k)).Build())
		}
		for _, res := range c.DoMulti(ctx, cmds...) {
			if err := res.Error(); err != nil {
				t.Fatal(err)
			}
		}
		// A rewrite's base is the files' size when it ends: writes that
		// stream in while it runs count as its base, and the next rewrite
		// waits for that to double. Let a running rewrite end before the
		// next round, as a sale's writes would over seconds.
		for wait := time.Now().Add(10 * time.Second); info(t, c, "aof_rewrite_in_progress") == 1 && time.Now().Before(wait); {
			time.Sleep(5 * time.Millisecond)
		}
	}
	written := int64(keys * rounds * len(val(0, 0)))
	deadline := time.Now().Add(30 * time.Second)
	for info(t, c, "aof_rewrites") == 0 || info(t, c, "aof_rewrite_in_progress") == 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no rewrite of the append-only file after %d bytes of writes (aof_current_size %d)",
				written, info(t, c, "aof_current_size"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.Close()
	r.Stop()
	size := aofBytes(t, dir)
	t.Logf("%d bytes written, %d bytes of append-only files", written, size)
	// The image is ~1 MB and the commands since the last rewrite at most
	// half of it or the 4 MB minimum. Without a rewrite the files would
	// hold every write.
	if size > written/2 {
		t.Fatalf("%d bytes of append-only files after %d bytes of writes: not compacted", size, written)
	}

	r, err = StartRedis(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	c = redisClient(t, r.Addr)
	defer c.Close()
	for k := 0; k < keys; k += 97 {
		got, err := c.Do(ctx, c.B().Get().Key(fmt.Sprintf("k%d", k)).Build()).ToString()
		if err != nil || got != val(rounds-1, k) {
			t.Fatalf("after the restart k%d = %.20q… (%v), want the last round's value", k, got, err)
		}
	}
}
