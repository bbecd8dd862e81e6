package edge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"
	"go.uber.org/zap"

	"seckill/lua"
)

// EdgesKey is the sorted set of live edges on the default Redis: member =
// edge id, score = the member's expiry in Redis server milliseconds
// (lua/edge_heartbeat.lua).
const EdgesKey = "sk:edges"

var heartbeatScript = rueidis.NewLuaScript(lua.EdgeHeartbeat)

// fleet announces this edge to the others and counts the live ones: every
// edge.rate.gate_heartbeat it refreshes its member of EdgesKey with an
// expiry edge.rate.gate_ttl ahead (removing the expired members in the
// same call) and hands the count to onCount, which re-splits the
// admission gate. The hot path never waits for it: the gate's share is an
// atomic the loop swaps. A failed heartbeat keeps the last count (logged
// once until it recovers, counted in seckill_edge_heartbeat_errors_total);
// an edge that stops removes itself (leave), one that is killed drops out
// of the others' counts after the TTL.
type fleet struct {
	id      string
	rdb     rueidis.Client
	every   time.Duration
	ttl     time.Duration
	timeout time.Duration // one heartbeat's bound
	onCount func(n int64)
	live    prometheus.Gauge
	errs    prometheus.Counter
	log     *zap.Logger
	// maxEdges is edge.fleet_max_edges: a count above it is refused,
	// counted in over, and good (the last count within it) stays.
	maxEdges int64
	over     prometheus.Counter
	good     int64 // the last count accepted; 0 before the first
	refusing bool  // the last count was refused (logged once)

	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// newEdgeID names this edge: host, pid and 4 random bytes, so two edges
// never share a member even on one host or after a pid is reused.
func newEdgeID() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

// start runs the heartbeat loop until leave; the first heartbeat runs
// before start returns, so an edge admits its share from its first
// request.
func (f *fleet) start(ctx context.Context) {
	ctx, f.cancel = context.WithCancel(ctx)
	f.done = make(chan struct{})
	f.beat(ctx, false)
	go f.loop(ctx)
}

func (f *fleet) loop(ctx context.Context) {
	defer close(f.done)
	t := time.NewTicker(f.every)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		failing = f.beat(ctx, failing)
	}
}

// beat sends one heartbeat and reports whether it failed; failing is
// whether the one before did (the log says a failure once, then the
// recovery once).
func (f *fleet) beat(ctx context.Context, failing bool) bool {
	hctx, cancel := context.WithTimeout(ctx, f.timeout)
	n, err := heartbeatScript.Exec(hctx, f.rdb, []string{EdgesKey},
		[]string{f.id, strconv.FormatInt(f.ttl.Milliseconds(), 10)}).AsInt64()
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return failing
		}
		f.errs.Inc()
		if !failing {
			f.log.Warn("edge heartbeat failed; keeping the last live edge count", zap.String("edge", f.id), zap.Error(err))
		}
		return true
	}
	if failing {
		f.log.Info("edge heartbeat recovered", zap.String("edge", f.id), zap.Int64("liveEdges", n))
	}
	f.count(n)
	return false
}

// count takes a heartbeat's live edge count n. A count past maxEdges is
// not believed: members anything with write access to the default Redis
// can add would shrink this edge's share of the gate to nothing. The edge
// keeps its last count within the bound, or the bound itself before it has
// one (a smaller share, never a larger one), and warns once until the count
// is back within the bound.
func (f *fleet) count(n int64) {
	if n > f.maxEdges {
		f.over.Inc()
		if !f.refusing {
			f.log.Warn("live edge count above edge.fleet_max_edges refused; keeping the last count within it",
				zap.String("edge", f.id), zap.Int64("liveEdges", n), zap.Int64("maxEdges", f.maxEdges), zap.Int64("kept", max(f.good, 1)))
			f.refusing = true
		}
		if f.good == 0 {
			f.good = f.maxEdges
			f.live.Set(float64(f.good))
			f.onCount(f.good)
		}
		return
	}
	if f.refusing {
		f.log.Info("live edge count within edge.fleet_max_edges again", zap.String("edge", f.id), zap.Int64("liveEdges", n))
		f.refusing = false
	}
	f.good = max(n, 1)
	f.live.Set(float64(n))
	f.onCount(f.good)
}

// leave stops the heartbeat and removes this edge from EdgesKey, so the
// others' next heartbeat counts one edge less (a graceful stop; a killed
// edge drops out after the TTL). Idempotent.
func (f *fleet) leave(ctx context.Context) {
	f.once.Do(func() {
		if f.cancel == nil {
			return
		}
		f.cancel()
		<-f.done
		rctx, cancel := context.WithTimeout(ctx, f.timeout)
		defer cancel()
		if err := f.rdb.Do(rctx, f.rdb.B().Zrem().Key(EdgesKey).Member(f.id).Build()).Error(); err != nil {
			f.log.Warn("edge could not remove itself from the live edges; it drops out after the TTL",
				zap.String("edge", f.id), zap.Error(err))
		}
	})
}
