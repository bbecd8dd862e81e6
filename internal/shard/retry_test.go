package shard

import (
	"context"
	"testing"
	"time"

	"seckill/internal/testenv"
)

// openOne opens a Set on r alone.
func openOne(t *testing.T, r *testenv.Redis) *Set {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Default.Addrs = []string{r.Addr}
	set, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	c := set.Default
	if err := c.Do(context.Background(), c.B().Set().Key("k").Value("v").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	return set
}

// TestAReadGivesUpOnAShardThatStaysDown: a read-only command without a
// deadline against a shard that went away and stays away ends with an
// error after the bounded retries (readRetries, ~5–6 s), instead of
// retrying for as long as the shard is down (rueidis' own policy), which
// would hold a reconciler pass at one dead shard.
func TestAReadGivesUpOnAShardThatStaysDown(t *testing.T) {
	r := testenv.StartRedis(t)
	c := openOne(t, r).Default
	r.Stop()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- c.Do(context.Background(), c.B().Get().Key("k").Build()).Error() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a GET on a stopped redis-server succeeded")
		}
		t.Logf("gave up after %v: %v", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(60 * time.Second):
		t.Fatal("a GET without a deadline still retries after 60 s on a shard that is down")
	}
}

// TestAReadRidesThroughARestart: a read that starts while its shard is
// down and the shard is back within a second is answered (the retries
// are bounded, not gone).
func TestAReadRidesThroughARestart(t *testing.T) {
	r := testenv.StartRedis(t, testenv.WithRedisArgs("--appendonly", "yes"))
	c := openOne(t, r).Default
	r.Stop()
	done := make(chan error, 1)
	go func() {
		v, err := c.Do(context.Background(), c.B().Get().Key("k").Build()).ToString()
		if err == nil && v != "v" {
			t.Errorf("GET k = %q after the restart, want v", v)
		}
		done <- err
	}()
	time.Sleep(500 * time.Millisecond)
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("a GET during a half-second outage failed: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("a GET during a half-second outage did not end")
	}
}
