package edge

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"seckill/internal/testenv"
)

// fleetConfig is a gate of k 9, floor 90 shared by the live edges, with a
// fast heartbeat so the test sees changes in a fraction of a second.
func fleetConfig(c *Config) {
	c.Rate.GateK, c.Rate.GateFloor, c.Rate.GateEdges = 9, 90, 0
	c.FleetHeartbeat, c.FleetTTL = 100*time.Millisecond, 2*time.Second
}

// waitShare waits until e counts n live edges and its gate admits k/n and
// floor/n.
func waitShare(t *testing.T, e *edgeEnv, n int64) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("the edge's share of the gate for %d live edges", n), 5*time.Second, func() bool {
		k, floor := e.srv.GateShare()
		// The gauge is set just after the count a heartbeat stores: wait
		// for both.
		return e.srv.LiveEdges() == n && math.Abs(k-9/float64(n)) < 1e-9 && math.Abs(floor-90/float64(n)) < 1e-9 &&
			testenv.Metric(t, e.reg, "seckill_edge_live_edges", nil) == float64(n)
	})
}

// TestGateIsSplitByTheLiveEdges: three edges on one Redis each admit a
// third of the gate; one that stops leaves at once and the other two
// admit half each; one that is killed (no goodbye) drops out after the
// TTL, not before, and the last admits the whole gate.
func TestGateIsSplitByTheLiveEdges(t *testing.T) {
	e1 := newEdge(t, withConfig(fleetConfig))
	e2 := newEdge(t, withConfig(fleetConfig), withRedis(e1.redis))
	e3 := newEdge(t, withConfig(fleetConfig), withRedis(e1.redis))
	for _, e := range []*edgeEnv{e1, e2, e3} {
		waitShare(t, e, 3)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e3.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	// Gone when its shutdown returns, its TTL far from over: it removed
	// itself.
	if r := e1.redis.Do(t, "ZSCORE", EdgesKey, e3.srv.fleet.id); !rueidis.IsRedisNil(r.Error()) {
		t.Fatalf("the stopped edge is still a live edge after its shutdown: %v", r)
	}
	for _, e := range []*edgeEnv{e1, e2} {
		waitShare(t, e, 2)
	}

	// Killed: the heartbeat stops and nothing removes the member.
	killed := time.Now()
	e2.srv.fleet.cancel()
	<-e2.srv.fleet.done
	waitShare(t, e1, 1)
	// The member outlives its last heartbeat by the TTL, and that
	// heartbeat was about one interval before the kill (two, to allow a
	// late tick); a graceful leave is seen within one interval.
	if d, min := time.Since(killed), e1.srv.fleet.ttl-2*e1.srv.fleet.every; d < min {
		t.Fatalf("the killed edge dropped out %v after the kill, before its TTL could end (%v)", d, min)
	}
}

// TestHeartbeatFailureKeepsTheLastCount: with Redis gone the edges keep
// their last split (never 1/0, never the whole gate each), count the
// failures, and follow the live count again once Redis is back.
func TestHeartbeatFailureKeepsTheLastCount(t *testing.T) {
	e1 := newEdge(t, withConfig(fleetConfig))
	e2 := newEdge(t, withConfig(fleetConfig), withRedis(e1.redis))
	waitShare(t, e1, 2)
	waitShare(t, e2, 2)

	e1.redis.Stop()
	testenv.Eventually(t, "failed heartbeats counted", 5*time.Second, func() bool {
		return testenv.Metric(t, e1.reg, "seckill_edge_heartbeat_errors_total", nil) >= 3
	})
	if n := e1.srv.LiveEdges(); n != 2 {
		t.Fatalf("live edges after failed heartbeats: %d, want the last count 2", n)
	}
	if k, _ := e1.srv.GateShare(); math.Abs(k-4.5) > 1e-9 {
		t.Fatalf("gate k %v with Redis down, want the last share 4.5", k)
	}

	if err := e1.redis.Start(); err != nil {
		t.Fatal(err)
	}
	// The restarted Redis is empty (no persistence): each edge counts
	// itself, then both once both have beaten. The kept count is 2 as
	// well, so first see both heartbeats land in the new Redis.
	testenv.Eventually(t, "both edges beating into the restarted Redis", 5*time.Second, func() bool {
		return e1.redis.Int(t, "ZCARD", EdgesKey) == 2
	})
	waitShare(t, e1, 2)
}

// TestFixedGateEdgesOverridesTheLiveCount: edge.rate.gate_edges > 0 pins
// the split whatever the live count.
func TestFixedGateEdgesOverridesTheLiveCount(t *testing.T) {
	fixed := func(c *Config) { fleetConfig(c); c.Rate.GateEdges = 3 }
	e1 := newEdge(t, withConfig(fixed))
	e2 := newEdge(t, withConfig(fixed), withRedis(e1.redis))
	testenv.Eventually(t, "both edges counted", 5*time.Second, func() bool { return e1.srv.LiveEdges() == 2 && e2.srv.LiveEdges() == 2 })
	if k, floor := e1.srv.GateShare(); math.Abs(k-3) > 1e-9 || math.Abs(floor-30) > 1e-9 {
		t.Fatalf("gate (%v, %v), want the fixed third (3, 30)", k, floor)
	}
	// A reload to 0 follows the live count at once.
	r := e1.srv.Rate()
	r.GateEdges = 0
	if _, err := e1.srv.SetRate(r); err != nil {
		t.Fatal(err)
	}
	if k, _ := e1.srv.GateShare(); math.Abs(k-4.5) > 1e-9 {
		t.Fatalf("gate k %v after a reload to the live count, want 4.5", k)
	}
}

// TestForgedEdgesDoNotShrinkTheShare: 5,000 members forged into sk:edges
// (expiring in a year, so no heartbeat removes them) are a count past
// edge.fleet_max_edges: it is refused with a warning and
// seckill_edge_fleet_refused_total, and each of the two real edges keeps
// admitting half the gate, not a 5,002nd. Once the forged members are
// gone the count is believed again.
func TestForgedEdgesDoNotShrinkTheShare(t *testing.T) {
	e1 := newEdge(t, withConfig(fleetConfig))
	e2 := newEdge(t, withConfig(fleetConfig), withRedis(e1.redis))
	waitShare(t, e1, 2)
	waitShare(t, e2, 2)

	ctx := context.Background()
	year := strconv.FormatInt(time.Now().Add(365*24*time.Hour).UnixMilli(), 10)
	args := []string{"ZADD", EdgesKey}
	for i := range 5000 {
		args = append(args, year, "forged-"+strconv.Itoa(i))
	}
	n, err := e1.rdb.Do(ctx, e1.rdb.B().Arbitrary(args...).Build()).AsInt64()
	if err != nil || n != 5000 {
		t.Fatalf("ZADD of the forged members: %d, %v", n, err)
	}
	for _, e := range []*edgeEnv{e1, e2} {
		testenv.Eventually(t, "forged counts refused", 5*time.Second, func() bool {
			return testenv.Metric(t, e.reg, "seckill_edge_fleet_refused_total", nil) >= 3
		})
		if n := e.srv.LiveEdges(); n != 2 {
			t.Fatalf("live edges with 5,000 forged members: %d, want the last good count 2", n)
		}
		if k, floor := e.srv.GateShare(); math.Abs(k-4.5) > 1e-9 || math.Abs(floor-45) > 1e-9 {
			t.Fatalf("gate (%v, %v) with 5,000 forged members, want half (4.5, 45)", k, floor)
		}
		if got := testenv.Metric(t, e.reg, "seckill_edge_live_edges", nil); got != 2 {
			t.Fatalf("seckill_edge_live_edges %v, want 2", got)
		}
	}

	if err := e1.rdb.Do(ctx, e1.rdb.B().Zremrangebyscore().Key(EdgesKey).Min(year).Max(year).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	e3 := newEdge(t, withConfig(fleetConfig), withRedis(e1.redis))
	for _, e := range []*edgeEnv{e1, e2, e3} {
		waitShare(t, e, 3)
	}
}

// TestFirstCountPastTheBoundTakesTheBound: an edge whose very first
// heartbeat counts more than edge.fleet_max_edges has no good count to
// keep: it admits the share of the bound (smaller, never larger).
func TestFirstCountPastTheBoundTakesTheBound(t *testing.T) {
	r := testenv.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	for i := range 4 {
		if err := rdb.Do(ctx, rdb.B().Zadd().Key(EdgesKey).ScoreMember().ScoreMember(float64(time.Now().Add(365*24*time.Hour).UnixMilli()), "forged-"+strconv.Itoa(i)).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	bound := func(c *Config) { fleetConfig(c); c.FleetMaxEdges = 3 }
	e := newEdge(t, withConfig(bound), withRedis(r))
	waitShare(t, e, 3)
	if got := testenv.Metric(t, e.reg, "seckill_edge_fleet_refused_total", nil); got < 1 {
		t.Fatalf("seckill_edge_fleet_refused_total %v, want the first count refused", got)
	}
}
