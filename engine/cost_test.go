package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"seckill/internal/testenv"
	"seckill/sale"
)

// TestAnAcceptedBuyerCostsOneRedisCall: the in-process engine, with the
// user × SKU window on, accepts N buyers one after another (each alone in
// its group-commit batch), once on a hot SKU whose shard is a redis-server
// of its own and once on a plain SKU of the default Redis. Counted on the
// servers (INFO commandstats) and on the clients (round trips), each
// accepted buyer costs exactly one Redis call — an EVALSHA of the occupy
// script on its SKU's shard, which counts the window and takes the stock,
// the buyer's record being its QUEUING result — and no command at all elsewhere: for the hot
// SKU, none on the default Redis.
func TestAnAcceptedBuyerCostsOneRedisCall(t *testing.T) {
	const n = 20
	for _, hot := range []bool{true, false} {
		name := map[bool]string{true: "a hot SKU on its own shard", false: "a plain SKU on the default Redis"}[hot]
		t.Run(name, func(t *testing.T) {
			r := newRig(t)
			defTrips, hotTrips := testenv.CountShardTrips(r.shards.Wrap)
			k := testenv.StartKafka(t, 1)
			cfg := DefaultConfig()
			cfg.Kafka.Brokers = k.Addrs
			cfg.Signing = testSigning
			cfg.Window = Window{Limit: 10, Period: time.Minute}
			e, err := New(cfg, r.stock, r.res, zaptest.NewLogger(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e.Close() })
			const sku = 1001
			r.preheat(t, activity(1, sku, 1000, hot))
			ctx := context.Background()
			// The first call loads the script (NOSCRIPT, then EVAL).
			if _, err := e.Occupy(ctx, r.order(t, sku, 1)); err != nil {
				t.Fatal(err)
			}
			own, other := r.hot, r.def
			ownTrips, otherTrips := hotTrips, defTrips
			if !hot {
				own, other, ownTrips, otherTrips = r.def, r.hot, defTrips, hotTrips
			}
			ownStats, otherStats := own.Client(t), other.Client(t)
			o0, x0 := testenv.CommandStats(t, ownStats), testenv.CommandStats(t, otherStats)
			ot, xt := ownTrips.Count(), otherTrips.Count()
			var rns []string
			for u := int64(100); u < 100+n; u++ {
				tk, err := e.Occupy(ctx, r.order(t, sku, u))
				if err != nil {
					t.Fatalf("buyer %d: %v", u, err)
				}
				rns = append(rns, tk.RequestNo)
			}
			gotOwn, gotOther := testenv.CommandStats(t, ownStats).Since(o0), testenv.CommandStats(t, otherStats).Since(x0)
			if trips := ownTrips.Count() - ot; trips != n {
				t.Errorf("%d round trips to the SKU's shard for %d buyers, want %d", trips, n, n)
			}
			if trips := otherTrips.Count() - xt; trips != 0 {
				t.Errorf("%d round trips to the other Redis, want none", trips)
			}
			// Inside each call (one buyer): the window (an HMGET of the
			// SKU's window hash; a buyer who takes a ticket is not
			// counted, so no HSET or PEXPIRE of it), the stock rules (TIME,
			// HMGET of meta and users, GET), the take (DECRBY, INCRBY, HSET
			// of users, ZADD of pending); no result (the record is its
			// QUEUING).
			want := testenv.Commands{"evalsha": n, "hmget": 3 * n, "time": n, "get": n,
				"decrby": n, "incrby": n, "hset": n, "zadd": n}
			if fmt.Sprint(gotOwn) != fmt.Sprint(want) {
				t.Errorf("the SKU's shard ran %v\nwant %v", gotOwn, want)
			}
			if len(gotOther) != 0 {
				t.Errorf("the other Redis ran %v, want nothing", gotOther)
			}
			// Each buyer reads its ticket QUEUING (its record names it).
			for i, rn := range rns {
				if a, k, _, ok := sale.ParseRequestNo(rn); !ok || a != 1 || k != sku {
					t.Fatalf("requestNo %q does not name activity 1, SKU %d", rn, sku)
				}
				if got, err := r.res.Read(ctx, 100+int64(i), rn); err != nil || got.State != sale.ResultQueuing {
					t.Fatalf("result of %s: %+v %v", rn, got, err)
				}
			}
		})
	}
}
