package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"go.uber.org/zap/zaptest"

	"seckill/internal/keyring"
	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/stock"
)

func TestOccupyQueuesADurableMessage(t *testing.T) { eachMode(t, testOccupyQueuesADurableMessage) }

func testOccupyQueuesADurableMessage(t *testing.T, r *rig, k *testenv.Kafka, e Engine) {
	r.preheat(t, activity(1, 1001, 5, false))
	ctx := context.Background()

	req := r.order(t, 1001, 42)
	req.TraceID = "trace-1"
	tk, err := e.Occupy(ctx, req)
	if err != nil {
		t.Fatalf("occupy: %v", err)
	}
	if tk.RequestNo == "" || tk.Remaining != 4 {
		t.Fatalf("ticket %+v", tk)
	}
	got, err := r.res.Read(ctx, req.UserID, tk.RequestNo)
	if err != nil || got.State != sale.ResultQueuing || got.Owner != 42 {
		t.Fatalf("result %+v %v", got, err)
	}
	msgs := readAll(t, k.Addrs, 1)
	m, err := sale.DecodeMessage(msgs[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	if m.RequestNo != tk.RequestNo || m.UserID != 42 || m.SKUID != 1001 || m.ActivityID != 1 || m.Quantity != 1 || m.UnitPrice != 9900 || m.TraceID != "trace-1" {
		t.Fatalf("message %+v", m)
	}
	// Signed with the first key: the consumer's verifier (the rotated list
	// too) accepts it.
	for _, keys := range [][]keyring.Key{testSigning.Keys, {{ID: "k0", Secret: "next-order-secret-0123456789abcdef"}, testSigning.Keys[0]}} {
		v, err := sale.NewSigner(sale.SigningConfig{Keys: keys})
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Verify(msgs[0].Value, &m); err != nil || m.KeyID != testSigning.Keys[0].ID {
			t.Fatalf("message %s does not verify: %v", msgs[0].Value, err)
		}
	}
	if string(msgs[0].Key) != "42" {
		t.Fatalf("message key %q, want the user id", msgs[0].Key)
	}

	// The same user again: duplicate naming the held ticket.
	tk2, err := e.Occupy(ctx, r.order(t, 1001, 42))
	if !errors.Is(err, stock.ErrDuplicate) || tk2.RequestNo != tk.RequestNo {
		t.Fatalf("second occupy: %+v %v", tk2, err)
	}
	// The edge resolves every attempt: one without its resolution cannot
	// be occupied.
	if _, err := e.Occupy(ctx, &Request{UserID: 1, Quantity: 1}); !errors.Is(err, stock.ErrUnknownSKU) {
		t.Fatalf("an unresolved request: %v", err)
	}
	// A quantity below one is refused before Redis: no stock moves, no
	// record is written for the buyer.
	for _, q := range []int64{0, -1} {
		req := r.order(t, 1001, 43)
		req.Quantity = q
		if _, err := e.Occupy(ctx, req); !errors.Is(err, stock.ErrOverLimit) {
			t.Fatalf("quantity %d: %v, want over limit", q, err)
		}
	}
	if c := r.counts(t, 1, 1001); c.Remaining != 4 || c.Holders != 1 {
		t.Fatalf("after the refused quantities: %+v", c)
	}
}

func TestBrokerUnreachableAnswersBusyAndRestoresStock(t *testing.T) {
	eachMode(t, testBrokerUnreachableAnswersBusyAndRestoresStock)
}

func testBrokerUnreachableAnswersBusyAndRestoresStock(t *testing.T, r *rig, k *testenv.Kafka, e Engine) {
	r.preheat(t, activity(1, 1001, 5, false))
	ctx := context.Background()
	if _, err := e.Occupy(ctx, r.order(t, 1001, 1)); err != nil {
		t.Fatalf("occupy with a live broker: %v", err)
	}
	k.Cluster.Close()

	start := time.Now()
	tk, err := e.Occupy(ctx, r.order(t, 1001, 2))
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("occupy with the broker gone: %+v %v, want ErrBusy", tk, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("busy answer took %v, want it bounded by the send timeout", d)
	}
	c := r.counts(t, 1, 1001)
	if c.Remaining != 4 || c.Holders != 1 || c.Sold != 1 {
		t.Fatalf("counts %+v: the failed ticket's stock must be back (4 left, 1 holder)", c)
	}
	// User 2 was released and may try again later.
	a, sku, _ := r.cat.Lookup(1, 1001)
	if res, _ := r.stock.Occupy(ctx, a, sku, 2, "retry", 1); res.Code != stock.CodeOK {
		t.Fatalf("user 2 after release: %+v", res)
	}
}

func TestHotSKUKeysLandOnlyOnTheHotShard(t *testing.T) {
	eachMode(t, testHotSKUKeysLandOnlyOnTheHotShard)
}

func testHotSKUKeysLandOnlyOnTheHotShard(t *testing.T, r *rig, _ *testenv.Kafka, e Engine) {
	a := activity(1, 1001, 10, false)
	a.SKUs = append(a.SKUs, sale.SKU{ID: 1002, Stock: 10, Price: 100, LimitPerUser: 1, Hot: true})
	r.preheat(t, a)
	ctx := context.Background()
	for u := int64(1); u <= 3; u++ {
		if _, err := e.Occupy(ctx, r.order(t, 1002, u)); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Occupy(ctx, r.order(t, 1001, u)); err != nil {
			t.Fatal(err)
		}
	}
	hotKeys := keys(t, r.hot, "sk:{*")
	defKeys := keys(t, r.def, "sk:{*")
	for _, key := range hotKeys {
		if !contains(key, ":s1002}") {
			t.Errorf("hot shard holds %s", key)
		}
	}
	for _, key := range defKeys {
		if contains(key, ":s1002}") {
			t.Errorf("default shard holds hot key %s", key)
		}
	}
	if len(hotKeys) < 3 || len(defKeys) < 3 {
		t.Fatalf("hot keys %v, default keys %v", hotKeys, defKeys)
	}
	if n := r.hot.Int(t, "GET", sale.KeysFor(1, 1002).Stock); n != 7 {
		t.Fatalf("hot stock %d, want 7", n)
	}
}

func TestScriptFlushMidRunRecovers(t *testing.T) { eachMode(t, testScriptFlushMidRunRecovers) }

func testScriptFlushMidRunRecovers(t *testing.T, r *rig, _ *testenv.Kafka, e Engine) {
	r.preheat(t, activity(1, 1001, 400, false))
	buy := r.buyers(t, 1001)
	ctx := context.Background()
	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				_, err := e.Occupy(ctx, buy(int64(g*1000+i+1)))
				if err != nil {
					failed.Add(1)
					t.Errorf("occupy: %v", err)
					return
				}
				ok.Add(1)
				if g == 0 && i%10 == 5 {
					if err := r.def.Do(t, "SCRIPT", "FLUSH").Error(); err != nil {
						t.Errorf("script flush: %v", err)
					}
				}
			}
		}(g)
	}
	wg.Wait()
	if ok.Load() != 400 || failed.Load() != 0 {
		t.Fatalf("%d ok, %d failed; want all 400 through despite SCRIPT FLUSH", ok.Load(), failed.Load())
	}
	if c := r.counts(t, 1, 1001); c.Remaining != 0 || c.Holders != 400 {
		t.Fatalf("counts %+v", c)
	}
}

func readAll(t *testing.T, brokers []string, n int) []*sarama.ConsumerMessage {
	t.Helper()
	c, err := sarama.NewConsumer(brokers, sarama.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	parts, err := c.Partitions(sale.OrdersTopic)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan *sarama.ConsumerMessage, 1024)
	for _, p := range parts {
		pc, err := c.ConsumePartition(sale.OrdersTopic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		go func() {
			for m := range pc.Messages() {
				out <- m
			}
		}()
	}
	var got []*sarama.ConsumerMessage
	deadline := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case m := <-out:
			got = append(got, m)
		case <-deadline:
			t.Fatalf("read %d of %d messages", len(got), n)
		}
	}
	return got
}

func keys(t *testing.T, r *testenv.Redis, pattern string) []string {
	t.Helper()
	ks, err := r.Do(t, "KEYS", pattern).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestFlushedRedisAnswersBusyUntilRebuilt: Redis loses everything mid-sale
// (FLUSHALL: the catalog and the SKU). Every engine mode — both occupy
// paths and the sidecar protocol — answers busy (stock.ErrStateLost), never
// unknown SKU or not open, until the SKU is rebuilt; then it sells again.
func TestFlushedRedisAnswersBusyUntilRebuilt(t *testing.T) {
	eachMode(t, testFlushedRedisAnswersBusyUntilRebuilt)
}

func testFlushedRedisAnswersBusyUntilRebuilt(t *testing.T, r *rig, _ *testenv.Kafka, e Engine) {
	ctx := context.Background()
	a, k := r.preheat(t, activity(1, 1001, 5, false))
	if _, err := e.Occupy(ctx, r.order(t, 1001, 1)); err != nil {
		t.Fatal(err)
	}
	r.def.Do(t, "FLUSHALL")
	if err := r.cat.Load(ctx); err != nil {
		t.Fatal(err)
	}
	for _, req := range []*Request{r.order(t, 1001, 1), r.order(t, 1001, 2), r.order(t, 1001, 3)} {
		tk, err := e.Occupy(ctx, req)
		if !errors.Is(err, ErrBusy) || !errors.Is(err, stock.ErrStateLost) || tk.RequestNo != "" {
			t.Fatalf("user %d while Redis lost the SKU: %+v %v, want busy (state lost)", req.UserID, tk, err)
		}
	}
	if ok, err := r.stock.Rebuild(ctx, a, k, 5, 0, nil, nil); !ok || err != nil {
		t.Fatalf("rebuild: %v %v", ok, err)
	}
	tk, err := e.Occupy(ctx, r.order(t, 1001, 2))
	if err != nil || tk.Remaining != 4 {
		t.Fatalf("after the rebuild: %+v %v", tk, err)
	}
}

// TestEngineWithoutSigningKeyRefusesToStart names the setting: an engine
// that could not sign would produce messages every consumer dead-letters.
func TestEngineWithoutSigningKeyRefusesToStart(t *testing.T) {
	cfg := DefaultConfig()
	_, err := New(cfg, nil, nil, zaptest.NewLogger(t), nil)
	if err == nil || !strings.Contains(err.Error(), "SECKILL_ORDER_SIGNING_KEYS") {
		t.Fatalf("engine without a signing key: %v", err)
	}
}

// TestProducerConfigCarriesKafkaSecurity: engine.kafka.tls and .sasl reach
// the producer's Sarama config.
func TestProducerConfigCarriesKafkaSecurity(t *testing.T) {
	k := DefaultConfig().Kafka
	k.SASL.Mechanism, k.SASL.User, k.SASL.Password = "SCRAM-SHA-256", "engine", "pw"
	k.TLS.Enabled, k.TLS.ServerName = true, "kafka.internal"
	c, err := SaramaConfig(k, "x")
	if err != nil {
		t.Fatal(err)
	}
	if !c.Net.TLS.Enable || c.Net.TLS.Config.ServerName != "kafka.internal" || !c.Net.SASL.Enable ||
		c.Net.SASL.Mechanism != sarama.SASLTypeSCRAMSHA256 || c.Net.SASL.User != "engine" || c.Net.SASL.SCRAMClientGeneratorFunc == nil {
		t.Fatalf("producer config: tls %v sasl %+v", c.Net.TLS.Enable, c.Net.SASL)
	}
}
