package shard

import (
	"context"
	"testing"
	"time"

	"seckill/internal/testenv"
)

// TestCheckSeesLoadingThenReady: a redis-server restarted on a dataset it
// takes seconds to load answers LOADING — to a new client's handshake and
// to the commands of a client connected before the restart — and Check
// reports it as loading (not as down, not as ready) until it is done.
func TestCheckSeesLoadingThenReady(t *testing.T) {
	r := testenv.StartRedis(t, testenv.WithRedisArgs("--appendonly", "yes"))
	r.Fill(t, 20000, 64)
	cfg := DefaultConfig()
	cfg.Default.Addrs = []string{r.Addr}
	ctx := context.Background()
	if err := Check(ctx, cfg, cfg.Default); err != nil {
		t.Fatalf("Check before the restart: %v", err)
	}
	set, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()

	if err := r.RestartLoading(3 * time.Second); err != nil {
		t.Fatal(err)
	}
	loading, err := r.Loading()
	if err != nil || !loading {
		t.Fatalf("the restarted server is not loading (%v): the test needs it to be", err)
	}
	err = Check(ctx, cfg, cfg.Default)
	if err == nil || !IsLoading(err) {
		t.Fatalf("Check while loading: %v, want a LOADING error", err)
	}
	// A client connected before the restart: a write is answered LOADING
	// at once (rueidis retries only read-only commands), once the
	// connections the restart broke have said so (EOF, one per pipelined
	// connection).
	c := set.Default
	for i := 0; ; i++ {
		start := time.Now()
		werr := c.Do(ctx, c.B().Set().Key("k").Value("v").Build()).Error()
		if d := time.Since(start); d > time.Second {
			t.Errorf("SET while loading took %v to fail", d)
		}
		if IsLoading(werr) {
			break
		}
		if werr == nil || i == 10 {
			t.Fatalf("SET while loading: %v, want LOADING", werr)
		}
	}
	if l, _ := r.Loading(); !l {
		t.Fatal("loading ended before the checks ran: make the dataset larger")
	}
	if err := r.WaitLoaded(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := Check(ctx, cfg, cfg.Default); err != nil {
		t.Fatalf("Check after loading: %v", err)
	}
	if n, err := c.Do(ctx, c.B().Dbsize().Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("database 0 after loading: %d keys, %v", n, err)
	}

	r.Stop()
	if err := Check(ctx, cfg, cfg.Default); err == nil || IsLoading(err) {
		t.Fatalf("Check with the server down: %v, want a dial error", err)
	}
}

func TestDependenciesNameEachDeployment(t *testing.T) {
	cfg := DefaultConfig()
	if d := Dependencies(cfg); len(d) != 1 || d[0].Name != "redis.default" {
		t.Fatalf("one deployment: %v", d)
	}
	cfg.Hot = HotShards{{Addrs: cfg.Default.Addrs}}
	if d := Dependencies(cfg); len(d) != 1 {
		t.Fatalf("hot = default: %d dependencies", len(d))
	}
	cfg.Hot = HotShards{{Addrs: []string{"127.0.0.1:6380"}}}
	if d := Dependencies(cfg); len(d) != 2 || d[1].Name != "redis.hot0" {
		t.Fatalf("a hot shard of its own: %v", d)
	}
	cfg.Hot = HotShards{{Addrs: []string{"127.0.0.1:6380"}}, {Addrs: []string{"127.0.0.1:6381"}}}
	if d := Dependencies(cfg); len(d) != 3 || d[1].Name != "redis.hot0" || d[2].Name != "redis.hot1" {
		t.Fatalf("two hot shards: %v", d)
	}
}
