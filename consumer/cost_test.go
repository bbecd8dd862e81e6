package consumer

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"seckill/catalog"
	"seckill/internal/shard"
	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/stock"
	"seckill/stock/results"
	"seckill/store"
)

// TestBatchRedisWorkDoesNotGrowWithTheBatch processes batches of 10 and of
// 200 tickets — seven in ten of a hot SKU on its own redis-server and one
// in ten of a SKU on the default Redis, that become orders; one in ten of
// another default-shard SKU the database has none of (sold out: released
// by force); one in ten of the hot SKU released before the batch (FAIL
// RELEASED) — and counts, on both redis-servers,
// the commands (INFO commandstats) and the client's round trips each batch
// cost. Both sizes cost the same round trips and the same script calls and
// commands, except the result keys' own: an HSET and an EXPIRE per result,
// and an HGETALL per ticket that was not held (its earlier answer may
// stand), each on the shard of its ticket's SKU. Every result key is a key
// of its own, so that part is what the keys require; it goes in one
// pipeline per shard.
func TestBatchRedisWorkDoesNotGrowWithTheBatch(t *testing.T) {
	t.Parallel()
	scfg := store.DefaultConfig()
	scfg.DSN = filepath.Join(t.TempDir(), "orders.db")
	r := newRig(t, scfg)
	ctx := context.Background()

	hot := testenv.StartRedis(t)
	cfg := shard.DefaultConfig()
	cfg.Default.Addrs, cfg.Hot = []string{r.redis.Addr}, shard.HotShards{{Addrs: []string{hot.Addr}}}
	set, err := shard.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	defTrips, hotTrips := testenv.CountShardTrips(set.Wrap)
	r.stock = stock.New(set, catalog.New(set.Default))
	r.res = results.New(set.Default, r.stock.BucketClient, 0)

	const (
		hotSKU  = 70001 // on the hot shard, in the database
		soldSKU = 70002 // on the default shard, none left in the database
		plain   = 70003 // on the default shard, in the database
	)
	now := time.Now()
	act := sale.Activity{ID: 70, Start: now.Add(-time.Minute), End: now.Add(time.Hour), State: sale.StateOnline,
		SKUs: []sale.SKU{{ID: hotSKU, Stock: 1000, Price: 990, LimitPerUser: 1, Hot: true},
			{ID: soldSKU, Stock: 1000, Price: 990, LimitPerUser: 1},
			{ID: plain, Stock: 1000, Price: 990, LimitPerUser: 1}}}
	if err := r.stock.Preheat(ctx, act); err != nil {
		t.Fatal(err)
	}
	db := act
	db.SKUs = slices.Clone(act.SKUs)
	db.SKUs[1].Stock = 0
	if err := r.st.PutActivity(ctx, db); err != nil {
		t.Fatal(err)
	}
	c, err := New(testConfig(t, r), r.st, r.stock, r.res, zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	defStats, hotStats := r.redis.Client(t), hot.Client(t)

	user := int64(0)
	// batch returns n messages of tickets taken now: the mix above.
	batch := func(n int) ([]*sarama.ConsumerMessage, map[string]string) {
		t.Helper()
		var kms []*sarama.ConsumerMessage
		want := map[string]string{} // requestNo -> expected result
		for i := range n {
			user++
			sku, expect := int64(hotSKU), sale.ResultSuccess
			switch i % 10 {
			case 7:
				sku = plain
			case 8:
				sku, expect = soldSKU, sale.ResultFail+" "+sale.FailSoldOut
			case 9:
				expect = sale.ResultFail + " " + sale.FailReleased
			}
			rn := strconv.FormatInt(act.ID, 10) + "-" + strconv.FormatInt(sku, 10) + "-" + strconv.FormatInt(user, 10)
			res, err := r.stock.Occupy(ctx, &act, act.SKU(sku), user, rn, 1)
			if err != nil || res.Code != stock.CodeOK {
				t.Fatalf("occupy: %+v %v", res, err)
			}
			m := sale.Message{RequestNo: rn, ActivityID: act.ID, SKUID: sku, UserID: user, Quantity: 1,
				UnitPrice: 990, AcceptedAt: now.UnixMilli(), TraceID: "t-" + rn}
			if i%10 == 9 {
				if out, err := r.stock.Release(ctx, &m, false); err != nil || out != stock.Released {
					t.Fatalf("release: %v %v", out, err)
				}
			}
			kms = append(kms, &sarama.ConsumerMessage{Topic: sale.OrdersTopic, Offset: int64(i), Value: signed(&m)})
			want[rn] = expect
		}
		return kms, want
	}
	type cost struct {
		def, hot           testenv.Commands
		defTrips, hotTrips int64
	}
	run := func(n int) cost {
		t.Helper()
		kms, want := batch(n)
		b0, h0 := testenv.CommandStats(t, defStats), testenv.CommandStats(t, hotStats)
		dt, ht := defTrips.Count(), hotTrips.Count()
		sess := &session{ctx: ctx}
		if err := c.process(ctx, sess, kms); err != nil {
			t.Fatalf("batch of %d: %v", n, err)
		}
		got := cost{testenv.CommandStats(t, defStats).Since(b0), testenv.CommandStats(t, hotStats).Since(h0),
			defTrips.Count() - dt, hotTrips.Count() - ht}
		if sess.marked != n || sess.commits != 1 {
			t.Fatalf("batch of %d: %d marked, %d commits", n, sess.marked, sess.commits)
		}
		for rn, w := range want {
			e, err := r.res.Read(ctx, 0, rn)
			g := e.State
			if e.Code != "" {
				g += " " + e.Code
			}
			if err != nil || g != w {
				t.Fatalf("result of %s: %+v %v, want %s", rn, e, err, w)
			}
		}
		return got
	}
	run(10) // loads the scripts: a first call answers NOSCRIPT and runs EVAL

	// want is what a batch of n costs: the claim on each shard (one
	// script call per SKU, the two of the default shard in one pipeline),
	// the results on the shard of each one's SKU (8 in 10 on the hot one)
	// and one PUBLISH of them on the default Redis, the forced release of
	// the sold out tickets (one script call) and its "available" event;
	// reads of earlier results for the tickets that were not held (hot).
	want := func(n int) cost {
		tenth := int64(n / 10)
		return cost{
			def: testenv.Commands{
				"evalsha": 2 + 1, "hmget": 2 + 2, "sadd": 2, // claims + release
				"smismember": 1, "srem": 1, "hdel": 2, "decrby": 1, "incrby": 1, "publish": 1 + 1, // release, results
				"hset": 2, "expire": 2, // the results hashes of the default shard's two SKUs, one HSET each
			},
			hot: testenv.Commands{"evalsha": 1, "hmget": 1, "sadd": 1,
				"hget": tenth, "hset": 1, "expire": 1}, // the hot SKU's results hash
			// default: claim, results write, their PUBLISH, release, event;
			// hot: claim, results read, results write
			defTrips: 5, hotTrips: 3,
		}
	}
	for _, n := range []int{10, 200} {
		t.Run(fmt.Sprintf("a batch of %d", n), func(t *testing.T) {
			got, w := run(n), want(n)
			if fmt.Sprint(got.def) != fmt.Sprint(w.def) {
				t.Errorf("default shard commands %v\nwant %v", got.def, w.def)
			}
			if fmt.Sprint(got.hot) != fmt.Sprint(w.hot) {
				t.Errorf("hot shard commands %v\nwant %v", got.hot, w.hot)
			}
			if got.defTrips != w.defTrips || got.hotTrips != w.hotTrips {
				t.Errorf("round trips: %d to the default shard, %d to the hot one; want %d and %d",
					got.defTrips, got.hotTrips, w.defTrips, w.hotTrips)
			}
		})
	}
}

// session is the consumer group session process marks and commits on.
type session struct {
	ctx     context.Context
	marked  int
	commits int
}

func (s *session) Claims() map[string][]int32                  { return nil }
func (s *session) MemberID() string                            { return "cost" }
func (s *session) GenerationID() int32                         { return 1 }
func (s *session) MarkOffset(string, int32, int64, string)     {}
func (s *session) Commit()                                     { s.commits++ }
func (s *session) ResetOffset(string, int32, int64, string)    {}
func (s *session) MarkMessage(*sarama.ConsumerMessage, string) { s.marked++ }
func (s *session) Context() context.Context                    { return s.ctx }
