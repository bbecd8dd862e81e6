package consumer

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"seckill/internal/keyring"
	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/stock"
	"seckill/stock/results"
	"seckill/stock/stocktest"
	"seckill/store"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// rig is a consumer's world: a real redis-server with a preheated activity,
// kfake with the orders and dead-letter topics, and an orders database.
type rig struct {
	redis *testenv.Redis
	stock *stock.Stock
	res   *results.Store
	kafka *testenv.Kafka
	st    store.Store
	prod  sarama.SyncProducer
	act   sale.Activity
	seq   atomic.Int64
	// reg is the registry of the rig's consumer (one per rig), which
	// count and txCount read.
	reg *prometheus.Registry
}

const (
	actID   = 7
	skuID   = 7001
	stockN  = 100
	emptyID = 7002 // in stock in Redis, none left in the database
)

// runTest runs fn over each store implementation, each with its own Redis
// and broker.
func runTest(t *testing.T, fn func(t *testing.T, r *rig), opts ...store.Option) {
	t.Helper()
	stocktest.EachStore(t, func(t *testing.T, cfg store.Config) { fn(t, newRig(t, cfg, opts...)) })
}

func newRig(t *testing.T, scfg store.Config, opts ...store.Option) *rig {
	t.Helper()
	ctx := context.Background()
	l := stocktest.NewLedger(t, scfg, stocktest.Options{Store: opts})
	r := &rig{redis: l.Redis, stock: l.Stock, res: l.Results, st: l.Store, kafka: testenv.StartKafka(t, 2)}
	var err error

	now := time.Now()
	r.act = sale.Activity{ID: actID, Start: now.Add(-time.Minute), End: now.Add(time.Hour), State: sale.StateOnline,
		SKUs: []sale.SKU{{ID: skuID, Stock: stockN, Price: 990, LimitPerUser: 1},
			{ID: emptyID, Stock: 5, Price: 990, LimitPerUser: 1}}}
	if err := r.stock.Preheat(ctx, r.act); err != nil {
		t.Fatal(err)
	}
	db := r.act
	db.SKUs = []sale.SKU{r.act.SKUs[0], r.act.SKUs[1]}
	db.SKUs[1].Stock = 0
	if err := r.st.PutActivity(ctx, db); err != nil {
		t.Fatal(err)
	}

	pc := sarama.NewConfig()
	pc.Producer.Return.Successes = true
	pc.Producer.RequiredAcks = sarama.WaitForAll
	pc.Producer.Partitioner = sarama.NewHashPartitioner
	if r.prod, err = sarama.NewSyncProducer(r.kafka.Addrs, pc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.prod.Close() })
	return r
}

// occupy takes one unit for user through the engine's script, as the
// engine does before it produces the message.
func (r *rig) occupy(t *testing.T, sku, user int64) sale.Message {
	t.Helper()
	// A ticket number as the engine makes it (README "Numbers"): it names
	// the SKU, whose shard holds the result.
	req := strconv.FormatInt(actID, 10) + "-" + strconv.FormatInt(sku, 10) + "-" + strconv.FormatInt(user*1000+r.seq.Add(1), 10)
	res, err := r.stock.Occupy(context.Background(), &r.act, r.act.SKU(sku), user, req, 1)
	if err != nil || res.Code != stock.CodeOK {
		t.Fatalf("occupy user %d: %+v, %v", user, res, err)
	}
	return sale.Message{RequestNo: req, ActivityID: actID, SKUID: sku, UserID: user, Quantity: 1,
		UnitPrice: 990, AcceptedAt: time.Now().UnixMilli(), TraceID: "trace-" + req}
}

func (r *rig) produce(t *testing.T, msgs ...sale.Message) {
	t.Helper()
	for _, m := range msgs {
		r.produceRaw(t, strconv.FormatInt(m.UserID, 10), signed(&m))
	}
}

func (r *rig) produceRaw(t *testing.T, key string, value []byte) {
	t.Helper()
	if _, _, err := r.prod.SendMessage(&sarama.ProducerMessage{Topic: sale.OrdersTopic,
		Key: sarama.StringEncoder(key), Value: sarama.ByteEncoder(value)}); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// testSigning is the order-signing key the tests' engine (signed) and
// consumers share.
var testSigning = sale.SigningConfig{Keys: []keyring.Key{{ID: "t1", Secret: "consumer-test-order-secret-0123456789"}}}

var testSigner = func() *sale.Signer {
	s, err := sale.NewSigner(testSigning)
	if err != nil {
		panic(err)
	}
	return s
}()

// signed is m as the engine produces it.
func signed(m *sale.Message) []byte { return testSigner.AppendSigned(nil, m) }

func testConfig(t *testing.T, r *rig) Config {
	cfg := DefaultConfig()
	cfg.Signing = testSigning
	cfg.Brokers = r.kafka.Addrs
	cfg.Group = "g-" + t.Name()
	cfg.BatchSize = 50
	cfg.MaxWait = 10 * time.Millisecond
	cfg.Retries = 2
	cfg.RetryBackoff = 10 * time.Millisecond
	cfg.SessionTimeout = 6 * time.Second // kfake's minimum
	cfg.HeartbeatInterval = 500 * time.Millisecond
	cfg.RebalanceTimeout = 5 * time.Second
	cfg.RejoinBackoff = 100 * time.Millisecond
	return cfg
}

// start runs a consumer until the test ends; Close must make Run return.
func (r *rig) start(t *testing.T) *Consumer {
	t.Helper()
	c, err := New(testConfig(t, r), r.st, r.stock, r.res, zaptest.NewLogger(t), r.registry(t))
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- c.Run(context.Background()) }()
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		select {
		case err := <-ran:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after Close")
		}
	})
	return c
}

// result waits for the ticket's final result.
func (r *rig) result(t *testing.T, req string) results.Entry {
	t.Helper()
	var e results.Entry
	testenv.EventuallyOK(t, "the final result of "+req, 15*time.Second, func() error {
		var err error
		e, err = r.res.Read(context.Background(), 0, req)
		switch {
		case err != nil && !errors.Is(err, results.ErrNotFound):
			t.Fatal(err)
		case err != nil:
			return err
		case e.State == sale.ResultQueuing:
			return errors.New("still queuing")
		}
		return nil
	})
	return e
}

func (r *rig) counts(t *testing.T, sku int64) stock.Counts {
	t.Helper()
	n, err := r.stock.Counts(context.Background(), actID, sku)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (r *rig) orders(t *testing.T, sku int64) int64 {
	t.Helper()
	n, _, err := r.st.CountOrders(context.Background(), actID, sku)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// registry is a new registry for the rig's one consumer.
func (r *rig) registry(t *testing.T) *prometheus.Registry {
	t.Helper()
	if r.reg != nil {
		t.Fatal("a second consumer in one rig: count would add up both")
	}
	r.reg = prometheus.NewRegistry()
	return r.reg
}

// count is the rig's consumer's seckill_consumer_messages_total{outcome}.
func count(t *testing.T, r *rig, outcome string) int {
	t.Helper()
	return int(testenv.Metric(t, r.reg, "seckill_consumer_messages_total", map[string]string{"outcome": outcome}))
}

// txCount is how many SaveBatch transactions the rig's consumer timed.
func txCount(t *testing.T, r *rig) uint64 {
	t.Helper()
	return uint64(testenv.Metric(t, r.reg, "seckill_consumer_tx_seconds", nil))
}

// eventually is testenv.Eventually with the consumer tests' 10s (metrics
// settle just after results are written).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, what, 10*time.Second, cond)
}

func TestTicketsBecomeOrders(t *testing.T) {
	t.Parallel()
	runTest(t, func(t *testing.T, r *rig) {
		const n = 30
		var msgs []sale.Message
		for u := range int64(n) {
			msgs = append(msgs, r.occupy(t, skuID, 1000+u))
		}
		r.produce(t, msgs...)
		c := r.start(t)
		for _, m := range msgs {
			e := r.result(t, m.RequestNo)
			if e.State != sale.ResultSuccess || e.OrderNo != testenv.OrderNo(m.RequestNo) || e.Owner != m.UserID {
				t.Errorf("result of %s = %+v", m.RequestNo, e)
			}
			o, err := r.st.OrderByRequest(context.Background(), m.RequestNo)
			if err != nil || o.Status != store.OrderPendingPayment || o.UserID != m.UserID || o.TraceID != m.TraceID {
				t.Errorf("order of %s = %+v, %v", m.RequestNo, o, err)
			}
		}
		if got := r.orders(t, skuID); got != n {
			t.Errorf("%d orders, want %d", got, n)
		}
		if k := r.counts(t, skuID); k.Claimed != n || k.Holders != n || k.Remaining != stockN-n {
			t.Errorf("redis counts %+v, want %d claimed and %d remaining", k, n, stockN-n)
		}
		eventually(t, "offsets committed", func() bool { return r.committed(t, c.cfg.Group) == n })
		if got := count(t, r, outCreated); got != n {
			t.Errorf("created = %d, want %d", got, n)
		}
		for _, o := range []string{outExisting, outDuplicate, outSoldOut, outReleased, outFailed, outDLQ} {
			if got := count(t, r, o); got != 0 {
				t.Errorf("%s = %d, want 0", o, got)
			}
		}
	})
}

// committed sums the group's committed offsets over the orders topic.
func (r *rig) committed(t *testing.T, group string) int64 {
	t.Helper()
	admin, err := sarama.NewClusterAdmin(r.kafka.Addrs, sarama.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	res, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{sale.OrdersTopic: {0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, b := range res.Blocks[sale.OrdersTopic] {
		if b.Offset > 0 {
			sum += b.Offset
		}
	}
	return sum
}

func TestRedeliveredMessageMakesOneOrder(t *testing.T) {
	t.Parallel()
	runTest(t, func(t *testing.T, r *rig) {
		m := r.occupy(t, skuID, 1)
		r.produce(t, m, m) // twice, likely in one batch
		r.start(t)
		if e := r.result(t, m.RequestNo); e.State != sale.ResultSuccess {
			t.Fatalf("result %+v", e)
		}
		r.produce(t, m) // again, in a later batch
		eventually(t, "three deliveries counted", func() bool { return count(t, r, outCreated)+count(t, r, outExisting) == 3 })
		if got := count(t, r, outCreated); got != 1 {
			t.Errorf("created = %d, want 1", got)
		}
		if got := r.orders(t, skuID); got != 1 {
			t.Errorf("%d orders, want 1", got)
		}
		sn, err := r.st.Snapshot(context.Background(), actID, skuID)
		if err != nil || sn.Sold != 1 {
			t.Errorf("snapshot %+v, %v; want 1 sold", sn, err)
		}
		if e := r.result(t, m.RequestNo); e.State != sale.ResultSuccess || e.OrderNo != testenv.OrderNo(m.RequestNo) {
			t.Errorf("result after redelivery %+v", e)
		}
	})
}

func TestFailedTransactionIsRetried(t *testing.T) {
	t.Parallel()
	var fails atomic.Int32
	fails.Store(1)
	failOnce := store.WithBeforeCommit(func(context.Context, []sale.Message) error {
		if fails.Add(-1) >= 0 {
			return errors.New("injected transaction failure")
		}
		return nil
	})
	runTest(t, func(t *testing.T, r *rig) {
		fails.Store(1) // each implementation's run fails once
		var msgs []sale.Message
		for u := range int64(5) {
			msgs = append(msgs, r.occupy(t, skuID, 2000+u))
		}
		r.produce(t, msgs...)
		r.start(t)
		for _, m := range msgs {
			if e := r.result(t, m.RequestNo); e.State != sale.ResultSuccess {
				t.Errorf("result of %s = %+v", m.RequestNo, e)
			}
		}
		if got := r.orders(t, skuID); got != 5 {
			t.Errorf("%d orders, want 5", got)
		}
		if fails.Load() >= 0 {
			t.Error("the injected failure never fired")
		}
		if n := txCount(t, r); n < 2 {
			t.Errorf("%d transactions observed, want the failed one and its retry", n)
		}
		if got := count(t, r, outFailed); got != 0 {
			t.Errorf("failed = %d", got)
		}
	}, failOnce)
}

func TestReleasedTicketGetsNoOrder(t *testing.T) {
	t.Parallel()
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		m := r.occupy(t, skuID, 3)
		if out, err := r.stock.Release(ctx, &m, false); err != nil || out != stock.Released {
			t.Fatalf("release: %v, %v", out, err)
		}
		ok := r.occupy(t, skuID, 4)
		r.produce(t, m, ok)
		r.start(t)
		if e := r.result(t, m.RequestNo); e.State != sale.ResultFail || e.Code != sale.FailReleased {
			t.Errorf("result %+v, want FAIL RELEASED", e)
		}
		if e := r.result(t, ok.RequestNo); e.State != sale.ResultSuccess {
			t.Errorf("result of the held ticket %+v", e)
		}
		if _, err := r.st.OrderByRequest(ctx, m.RequestNo); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("order for a released ticket: %v", err)
		}
		eventually(t, "request log", func() bool {
			e, err := r.st.RequestLog(ctx, m.RequestNo)
			return err == nil && e.Status == store.StatusFailed
		})
		if k := r.counts(t, skuID); k.Remaining != stockN-1 || k.Holders != 1 {
			t.Errorf("redis counts %+v: the release must not run twice", k)
		}
		eventually(t, "released counted", func() bool { return count(t, r, outReleased) == 1 })
	})
}

func TestUndecodableMessageIsDeadLettered(t *testing.T) {
	t.Parallel()
	runTest(t, func(t *testing.T, r *rig) {
		r.produceRaw(t, "x", []byte("not an order"))
		m := r.occupy(t, skuID, 5)
		r.produce(t, m)
		c := r.start(t)
		if e := r.result(t, m.RequestNo); e.State != sale.ResultSuccess {
			t.Errorf("the good message next to it: %+v", e)
		}
		dl := r.readDLQ(t, 1)
		if string(dl[0].Value) != "not an order" {
			t.Errorf("dead letter value %q", dl[0].Value)
		}
		h := map[string]string{}
		for _, rh := range dl[0].Headers {
			h[string(rh.Key)] = string(rh.Value)
		}
		if h[HeaderReason] == "" || h[HeaderTopic] != sale.OrdersTopic || h[HeaderOffset] == "" || h[HeaderPartition] == "" {
			t.Errorf("dead letter headers %v", h)
		}
		eventually(t, "dlq counted", func() bool { return count(t, r, outDLQ) == 1 })
		eventually(t, "offsets committed past it", func() bool { return r.committed(t, c.cfg.Group) == 2 })
	})
}

// readDLQ reads n messages from the dead-letter topic.
func (r *rig) readDLQ(t *testing.T, n int) []*sarama.ConsumerMessage {
	t.Helper()
	cons, err := sarama.NewConsumer(r.kafka.Addrs, sarama.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	parts, err := cons.Partitions(sale.DLQTopic)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *sarama.ConsumerMessage, 16)
	for _, p := range parts {
		pc, err := cons.ConsumePartition(sale.DLQTopic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		go func() {
			for m := range pc.Messages() {
				got <- m
			}
		}()
	}
	var out []*sarama.ConsumerMessage
	for len(out) < n {
		select {
		case m := <-got:
			out = append(out, m)
		case <-time.After(10 * time.Second):
			t.Fatalf("read %d of %d dead letters", len(out), n)
		}
	}
	return out
}

func TestDatabaseSoldOutReleasesTheStock(t *testing.T) {
	t.Parallel()
	runTest(t, func(t *testing.T, r *rig) {
		before := r.counts(t, emptyID)
		m := r.occupy(t, emptyID, 6)
		r.produce(t, m)
		r.start(t)
		if e := r.result(t, m.RequestNo); e.State != sale.ResultFail || e.Code != sale.FailSoldOut {
			t.Errorf("result %+v, want FAIL SOLD_OUT", e)
		}
		eventually(t, "stock back in redis", func() bool {
			k := r.counts(t, emptyID)
			return k.Remaining == before.Remaining && k.Holders == 0 && k.Claimed == 0 && k.Sold == before.Sold
		})
		if got := r.orders(t, emptyID); got != 0 {
			t.Errorf("%d orders", got)
		}
		eventually(t, "soldout counted", func() bool { return count(t, r, outSoldOut) == 1 })
	})
}

func TestSecondTicketOfAUserWithAnOrderIsAnsweredWithThatOrder(t *testing.T) {
	t.Parallel()
	runTest(t, func(t *testing.T, r *rig) {
		first := r.occupy(t, skuID, 8)
		r.produce(t, first)
		r.start(t)
		if e := r.result(t, first.RequestNo); e.State != sale.ResultSuccess {
			t.Fatalf("first ticket %+v", e)
		}
		// Redis lost the user's record (say, a failover without the last
		// writes), so the user could take a second ticket.
		k := sale.KeysFor(actID, skuID)
		r.redis.Do(t, "HDEL", k.Users, "8")
		before := r.counts(t, skuID)
		second := r.occupy(t, skuID, 8)
		r.produce(t, second)
		e := r.result(t, second.RequestNo)
		if e.State != sale.ResultSuccess || e.OrderNo != testenv.OrderNo(first.RequestNo) {
			t.Errorf("second ticket %+v, want SUCCESS with the first order", e)
		}
		eventually(t, "second ticket released", func() bool {
			n := r.counts(t, skuID)
			return n.Remaining == before.Remaining && n.Holders == before.Holders
		})
		if got := r.orders(t, skuID); got != 1 {
			t.Errorf("%d orders", got)
		}
		eventually(t, "duplicate counted", func() bool { return count(t, r, outDuplicate) == 1 })
	})
}

func TestConfigValidateNamesTheKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"a heartbeat at the session timeout is refused", func(c *Config) { c.HeartbeatInterval = c.SessionTimeout }, "consumer.heartbeat_interval"},
		{"a zero batch size is refused", func(c *Config) { c.BatchSize = 0 }, "consumer.batch_size"},
		{"a zero timeout is refused", func(c *Config) { c.Timeout = 0 }, "consumer.timeout"},
		{"an instance id with a space is refused", func(c *Config) { c.InstanceID = "consumer 1" }, "consumer.instance_id"},
		{"an instance id of 250 characters is refused", func(c *Config) { c.InstanceID = strings.Repeat("c", 250) }, "consumer.instance_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mod(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want a message naming %s", err, tc.want)
			}
		})
	}
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	c.InstanceID = "seckill-consumer-0.pod_a"
	if err := c.Validate(); err != nil {
		t.Errorf("a pod name as instance id: %v", err)
	}
}

func TestCloseLetsTheBatchInProgressComplete(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	var once atomic.Bool
	slow := store.WithBeforeCommit(func(context.Context, []sale.Message) error {
		if once.CompareAndSwap(false, true) {
			close(entered)
			time.Sleep(300 * time.Millisecond) // Close arrives meanwhile
		}
		return nil
	})
	runTest(t, func(t *testing.T, r *rig) {
		once.Store(false) // armed again for each implementation
		entered = make(chan struct{})
		m := r.occupy(t, skuID, 9)
		r.produce(t, m)
		c := r.start(t)
		select {
		case <-entered:
		case <-time.After(15 * time.Second):
			t.Fatal("the batch never reached its transaction")
		}
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		// Everything of the batch is done by the time Close returns.
		e, err := r.res.Read(context.Background(), m.UserID, m.RequestNo)
		if err != nil || e.State != sale.ResultSuccess {
			t.Errorf("result after Close: %+v, %v", e, err)
		}
		if got := r.committed(t, c.cfg.Group); got != 1 {
			t.Errorf("committed offsets sum to %d after Close, want 1", got)
		}
	}, slow)
}

// flakyStore is down (SaveBatch and Ping fail) while down is set: the
// database unreachable as the consumer sees it.
type flakyStore struct {
	store.Store
	down     atomic.Bool
	attempts atomic.Int32
}

var errDown = errors.New("database unreachable")

func (f *flakyStore) SaveBatch(ctx context.Context, msgs []sale.Message, opts ...store.SaveOption) ([]store.Outcome, error) {
	f.attempts.Add(1)
	if f.down.Load() {
		return nil, errDown
	}
	return f.Store.SaveBatch(ctx, msgs, opts...)
}

func (f *flakyStore) Ping(ctx context.Context) error {
	if f.down.Load() {
		return errDown
	}
	return f.Store.Ping(ctx)
}

func TestDatabaseOutageFailsNoTicket(t *testing.T) {
	t.Parallel()
	runTest(t, func(t *testing.T, r *rig) {
		f := &flakyStore{Store: r.st}
		f.down.Store(true)
		r.st = f
		m := r.occupy(t, skuID, 10)
		r.produce(t, m)
		c := r.start(t)
		// Two sessions' worth of retries: the batch was left uncommitted
		// and delivered again.
		eventually(t, "a redelivery", func() bool { return f.attempts.Load() > int32(2*(c.cfg.Retries+1)) })
		if e, err := r.res.Read(context.Background(), m.UserID, m.RequestNo); err != nil || e.State != sale.ResultQueuing {
			t.Errorf("the occupy script's QUEUING result did not stay during the outage: %+v %v", e, err)
		}
		if got := r.committed(t, c.cfg.Group); got != 0 {
			t.Errorf("offsets committed during the outage: %d", got)
		}
		f.down.Store(false)
		if e := r.result(t, m.RequestNo); e.State != sale.ResultSuccess {
			t.Errorf("result after the outage %+v", e)
		}
		if got := count(t, r, outFailed); got != 0 {
			t.Errorf("failed = %d, want 0", got)
		}
	})
}

func TestPoisonMessageFailsAloneAndIsDeadLettered(t *testing.T) {
	t.Parallel()
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		// Activity 8 is in Redis but was never put into the database: the
		// database holds no price for its SKU, so its held ticket fails
		// (no order at a price the database does not hold).
		ghost := r.act
		ghost.ID = 8
		ghost.SKUs = []sale.SKU{{ID: 8001, Stock: 3, Price: 100, LimitPerUser: 1}}
		if err := r.stock.Preheat(ctx, ghost); err != nil {
			t.Fatal(err)
		}
		res, err := r.stock.Occupy(ctx, &ghost, &ghost.SKUs[0], 11, "8-8001-1", 1)
		if err != nil || res.Code != stock.CodeOK {
			t.Fatalf("occupy: %+v, %v", res, err)
		}
		bad := sale.Message{RequestNo: "8-8001-1", ActivityID: 8, SKUID: 8001, UserID: 11, Quantity: 1, UnitPrice: 100}
		good := r.occupy(t, skuID, 12)
		// One key: one partition, so both land in one batch.
		r.produceRaw(t, "same", signed(&bad))
		r.produceRaw(t, "same", signed(&good))
		c := r.start(t)
		if e := r.result(t, good.RequestNo); e.State != sale.ResultSuccess {
			t.Errorf("good message %+v", e)
		}
		if e := r.result(t, bad.RequestNo); e.State != sale.ResultFail || e.Code != sale.FailInvalid {
			t.Errorf("poison message %+v, want FAIL INVALID", e)
		}
		eventually(t, "poison ticket released", func() bool {
			n, err := r.stock.Counts(ctx, 8, 8001)
			return err == nil && n.Remaining == 3 && n.Holders == 0 && n.Claimed == 0
		})
		dl := r.readDLQ(t, 1)
		var reason string
		for _, h := range dl[0].Headers {
			if string(h.Key) == HeaderReason {
				reason = string(h.Value)
			}
		}
		if !strings.Contains(reason, "activity 8 sku 8001 unknown to the catalog") {
			t.Errorf("dead letter reason %q", reason)
		}
		eventually(t, "failed counted", func() bool { return count(t, r, outFailed) == 1 && count(t, r, outCreated) == 1 })
		eventually(t, "offsets committed", func() bool { return r.committed(t, c.cfg.Group) == 2 })
	})
}

// A static member (consumer.instance_id) restarted under the same id takes
// its partitions back at once: the group then holds one member, under that
// id, and the tickets sent after the restart become orders long before the
// minute-long session and rebalance timeouts could have let a stuck join
// through. (The SIGKILL version, a process killed and restarted at once,
// is e2e/chaos TestConsumerKilled.)
func TestStaticMemberRestartsWithoutWaitingForItself(t *testing.T) {
	t.Parallel()
	scfg := store.DefaultConfig()
	scfg.DSN = filepath.Join(t.TempDir(), "orders.db")
	r := newRig(t, scfg)
	cfg := testConfig(t, r)
	cfg.InstanceID = "orders-1"
	cfg.SessionTimeout, cfg.RebalanceTimeout = time.Minute, time.Minute
	startWith := func() *Consumer {
		c, err := New(cfg, r.st, r.stock, r.res, zaptest.NewLogger(t), prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		ran := make(chan error, 1)
		go func() { ran <- c.Run(context.Background()) }()
		t.Cleanup(func() {
			_ = c.Close()
			<-ran
		})
		return c
	}
	first := r.occupy(t, skuID, 5001)
	r.produce(t, first)
	c1 := startWith()
	if e := r.result(t, first.RequestNo); e.State != sale.ResultSuccess {
		t.Fatalf("first ticket: %+v", e)
	}
	// A static member does not leave the group when it stops: the broker
	// keeps it until its session times out, a minute from now.
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	startWith()
	second := r.occupy(t, skuID, 5002)
	r.produce(t, second)
	if e := r.result(t, second.RequestNo); e.State != sale.ResultSuccess {
		t.Fatalf("ticket after the restart: %+v", e)
	}
	admin, err := sarama.NewClusterAdmin(r.kafka.Addrs, sarama.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	groups, err := admin.DescribeConsumerGroups([]string{cfg.Group})
	if err != nil || len(groups) != 1 {
		t.Fatalf("describe group: %v %v", groups, err)
	}
	var ids []string
	for _, m := range groups[0].Members {
		if m.GroupInstanceId != nil {
			ids = append(ids, *m.GroupInstanceId)
		} else {
			ids = append(ids, "(dynamic)")
		}
	}
	if len(ids) != 1 || ids[0] != "orders-1" {
		t.Fatalf("group members by instance id %v, want just orders-1", ids)
	}
}
