package stock

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"seckill/catalog"
	"seckill/internal/shard"
	"seckill/internal/testenv"
	"seckill/sale"
)

// TestWaitReplicas: with redis.wait_replicas 1, an occupy is answered OK
// only once the replica holds it; with the replica stopped the batch is
// answered busy (ErrNotReplicated) and its stock is back on the master.
func TestWaitReplicas(t *testing.T) {
	replica, st := replicatedStock(t, 1, 500*time.Millisecond)
	ctx := context.Background()
	if err := st.Preheat(ctx, activity(1, 10, 5, false)); err != nil {
		t.Fatal(err)
	}
	a, k, _ := st.Catalog().Lookup(1, 10)
	users := sale.KeysFor(1, 10).Users

	// The first call finds no script on the server (EVALSHA answers
	// NOSCRIPT, EVAL follows with its own WAIT).
	res, err := st.Occupy(ctx, a, k, 1, "rn-1", 1)
	if err != nil || res.Code != CodeOK {
		t.Fatalf("occupy with the replica up: %+v, %v", res, err)
	}
	// Acknowledged means on the replica now, not eventually.
	if n, err := replica.Do(t, "HLEN", users).AsInt64(); err != nil || n != 1 {
		t.Fatalf("the replica holds %d records after an acknowledged occupy (%v), want 1", n, err)
	}
	res, err = st.Occupy(ctx, a, k, 2, "rn-2", 1)
	if err != nil || res.Code != CodeOK {
		t.Fatalf("second occupy (by EVALSHA): %+v, %v", res, err)
	}

	replica.Stop()
	_, err = st.Occupy(ctx, a, k, 3, "rn-3", 1)
	if !errors.Is(err, ErrNotReplicated) || !errors.Is(err, ErrBusy) {
		t.Fatalf("occupy with the replica down: %v, want ErrNotReplicated (busy)", err)
	}
	c, err := st.Counts(ctx, 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	if c.Remaining != 3 || c.Holders != 2 || c.Sold != 2 {
		t.Fatalf("after the unreplicated batch: %+v, want its unit given back (remaining 3, 2 holders)", c)
	}
	// The buyer may try again (its record is gone), and is busy again
	// while the replica stays down.
	if _, err := st.Occupy(ctx, a, k, 3, "rn-3b", 1); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("retry with the replica down: %v", err)
	}
}

// replicatedStock starts a master and a replica (replicaof) in steady
// state and a Stock on the master with redis.wait_replicas n and
// wait_timeout timeout (n 0: off).
func replicatedStock(t testing.TB, n int, timeout time.Duration) (*testenv.Redis, *Stock) {
	t.Helper()
	master := testenv.StartRedis(t, testenv.WithRedisArgs("--repl-diskless-sync-delay", "0"))
	replica := testenv.StartRedis(t, testenv.WithRedisArgs("--replicaof", "127.0.0.1", strconv.Itoa(master.Port)))
	// Online for the master (what WAIT counts): after a diskless sync,
	// once the replica's first REPLCONF ACK has come.
	testenv.Eventually(t, "the replica online", 10*time.Second, func() bool {
		info, err := master.Do(t, "INFO", "replication").ToString()
		return err == nil && strings.Contains(info, "state=online")
	})
	// Right after the sync the replica may answer its first GETACK only
	// at its periodic ACK (a second): wait until a write is acknowledged
	// promptly, as it is in steady state.
	mc := master.Client(t)
	testenv.Eventually(t, "a write acknowledged by the replica within 100ms", 10*time.Second, func() bool {
		rs := mc.DoMulti(context.Background(), mc.B().Set().Key("warm").Value("1").Build(), mc.B().Wait().Numreplicas(1).Timeout(100).Build())
		n, err := rs[1].AsInt64()
		return err == nil && n == 1
	})
	cfg := shard.DefaultConfig()
	cfg.Default.Addrs = []string{master.Addr}
	cfg.WaitReplicas, cfg.WaitTimeout = n, timeout
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	set, err := shard.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	return replica, New(set, catalog.New(set.Default))
}

// TestUnreplicatedBatchCountsItsBuyersAttempts: a batch given back because
// the replica did not acknowledge it counts each buyer's attempt in the
// user × SKU window, as every release does, where the call had the window
// on; a call without it (a drained attempt's) counts nothing.
func TestUnreplicatedBatchCountsItsBuyersAttempts(t *testing.T) {
	replica, st := replicatedStock(t, 1, 200*time.Millisecond)
	ctx := context.Background()
	if err := st.Preheat(ctx, activity(1, 10, 5, false)); err != nil {
		t.Fatal(err)
	}
	a, k, _ := st.Catalog().Lookup(1, 10)
	x := Extras{WindowLimit: 3, WindowPeriod: time.Hour}
	if left := time.Until(time.Now().Truncate(time.Hour).Add(time.Hour)); left < time.Minute {
		time.Sleep(left)
	}
	st.SetWindow(x.WindowLimit, x.WindowPeriod)
	key := sale.RateKey(1, 10, time.Now().UnixMilli()/time.Hour.Milliseconds())
	replica.Stop()
	if _, err := st.OccupyWith(ctx, a, k, x, 3, "rn-3", 1); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("occupy with the replica down: %v, want ErrNotReplicated", err)
	}
	if _, err := st.OccupyWith(ctx, a, k, Extras{}, 4, "rn-4", 1); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("occupy without the window, the replica down: %v, want ErrNotReplicated", err)
	}
	got, err := st.shards.Default.Do(ctx, st.shards.Default.B().Hgetall().Key(key).Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["3"] != "1" {
		t.Fatalf("window counts %v, want 3: 1 (its given-back attempt) and none for 4", got)
	}
	if c, err := st.Counts(ctx, 1, 10); err != nil || c.Remaining != 5 || c.Holders != 0 {
		t.Fatalf("after the unreplicated batches: %+v %v, want every unit back", c, err)
	}
}
