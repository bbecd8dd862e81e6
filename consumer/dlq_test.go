package consumer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zaptest"

	"seckill/internal/keyring"
	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/stock"
	"seckill/store"
)

// flakyDLQ fails the first fails sends to the dead-letter topic.
type flakyDLQ struct {
	sarama.SyncProducer
	fails atomic.Int32
	sends atomic.Int32
}

func (f *flakyDLQ) SendMessages(pms []*sarama.ProducerMessage) error {
	f.sends.Add(1)
	if f.fails.Add(-1) >= 0 {
		return errors.New("dead-letter topic unreachable")
	}
	return f.SyncProducer.SendMessages(pms)
}

// header is the value of m's header key ("" if none).
func header(m *sarama.ConsumerMessage, key string) string {
	for _, h := range m.Headers {
		if string(h.Key) == key {
			return string(h.Value)
		}
	}
	return ""
}

// quarantined waits for n rows in seckill_dead_letter.
func (r *rig) quarantined(t *testing.T, n int) []store.DeadLetter {
	t.Helper()
	var got []store.DeadLetter
	eventually(t, strconv.Itoa(n)+" quarantined letters", func() bool {
		var err error
		if got, err = r.st.QuarantinedLetters(context.Background(), 100); err != nil {
			t.Fatal(err)
		}
		return len(got) >= n
	})
	return got
}

// genuineBehind occupies and produces n genuine tickets on the partition of
// key, after whatever was produced there before.
func (r *rig) genuineBehind(t *testing.T, key string, n int) []sale.Message {
	t.Helper()
	var msgs []sale.Message
	for i := range n {
		m := r.occupy(t, skuID, int64(500+i))
		r.produceRaw(t, key, signed(&m))
		msgs = append(msgs, m)
	}
	return msgs
}

// wantOrdered checks every message became an order.
func (r *rig) wantOrdered(t *testing.T, msgs []sale.Message) {
	t.Helper()
	for _, m := range msgs {
		if e := r.result(t, m.RequestNo); e.State != sale.ResultSuccess {
			t.Errorf("ticket %s behind the poison: %+v, want SUCCESS", m.RequestNo, e)
		}
	}
	if n := r.orders(t, skuID); n != int64(len(msgs)) {
		t.Errorf("%d orders, want %d", n, len(msgs))
	}
}

// TestDeadLetterOutageQuarantinesTheLetter: a failed ticket whose dead
// letter the topic refuses is quarantined in the orders database; the
// batch commits, the ticket is released once and answered FAIL, and its
// story says why.
func TestDeadLetterOutageQuarantinesTheLetter(t *testing.T) {
	t.Parallel()
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		ghost := r.act
		ghost.ID = 8
		ghost.SKUs = []sale.SKU{{ID: 8001, Stock: 3, Price: 100, LimitPerUser: 1}}
		if err := r.stock.Preheat(ctx, ghost); err != nil {
			t.Fatal(err)
		}
		if res, err := r.stock.Occupy(ctx, &ghost, &ghost.SKUs[0], 11, "8-8001-2", 1); err != nil || res.Code != stock.CodeOK {
			t.Fatalf("occupy: %+v, %v", res, err)
		}
		bad := sale.Message{RequestNo: "8-8001-2", ActivityID: 8, SKUID: 8001, UserID: 11, Quantity: 1, UnitPrice: 100}
		r.produceRaw(t, "11", signed(&bad))

		c, err := New(testConfig(t, r), r.st, r.stock, r.res, zaptest.NewLogger(t), r.registry(t))
		if err != nil {
			t.Fatal(err)
		}
		f := &flakyDLQ{SyncProducer: c.dlq}
		f.fails.Store(1)
		c.dlq = f
		ran := make(chan error, 1)
		go func() { ran <- c.Run(ctx) }()
		defer func() {
			c.Close()
			<-ran
		}()

		if e := r.result(t, bad.RequestNo); e.State != sale.ResultFail || e.Code != sale.FailInvalid {
			t.Errorf("poison ticket %+v, want FAIL INVALID", e)
		}
		q := r.quarantined(t, 1)
		if string(q[0].Payload) != string(signed(&bad)) || !strings.Contains(q[0].Reason, "unknown") && q[0].Reason == "" {
			t.Errorf("quarantined %+v", q[0])
		}
		eventually(t, "offset committed", func() bool { return r.committed(t, c.cfg.Group) == 1 })
		if n := f.sends.Load(); n != 1 {
			t.Errorf("%d dead-letter sends, want the one refused (no redelivery)", n)
		}
		n, err := r.stock.Counts(ctx, 8, 8001)
		if err != nil || n.Remaining != 3 || n.Sold != 0 || n.Holders != 0 || n.Claimed != 0 {
			t.Errorf("redis after the poison ticket: %+v, %v; want its one unit back exactly once", n, err)
		}
		e, err := r.st.RequestLog(ctx, bad.RequestNo)
		if err != nil || e.Status != store.StatusFailed || !strings.Contains(e.Remark, "order failed") {
			t.Errorf("request log %+v, %v", e, err)
		}
		if got := testenv.Metric(t, r.reg, "seckill_consumer_dead_letters_total", map[string]string{"where": letterQuarantined}); got != 1 {
			t.Errorf("quarantined counted %v times", got)
		}
	})
}

// TestOversizedMessageIsDeadLetteredBounded: a value that fits the
// orders topic but not, with the dead-letter headers, the dead-letter
// producer's limit is dead-lettered bounded (its head, size and digest);
// the partition goes on making orders for the messages behind it.
func TestOversizedMessageIsDeadLetteredBounded(t *testing.T) {
	t.Parallel()
	runTest(t, func(t *testing.T, r *rig) {
		pc := sarama.NewConfig()
		pc.Producer.Return.Successes = true
		pc.Producer.RequiredAcks = sarama.WaitForAll
		pc.Producer.Partitioner = sarama.NewHashPartitioner
		pc.Producer.MaxMessageBytes = 2 << 20
		big, err := sarama.NewSyncProducer(r.kafka.Addrs, pc)
		if err != nil {
			t.Fatal(err)
		}
		defer big.Close()
		value := bytes.Repeat([]byte("x"), 1_048_400)
		if _, _, err := big.SendMessage(&sarama.ProducerMessage{Topic: sale.OrdersTopic, Key: sarama.StringEncoder("u"),
			Value: sarama.ByteEncoder(value)}); err != nil {
			t.Fatalf("produce the poison: %v", err)
		}
		msgs := r.genuineBehind(t, "u", 3)
		c := r.start(t)
		r.wantOrdered(t, msgs)
		dl := r.readDLQ(t, 1)
		sum := sha256.Sum256(value)
		if len(dl[0].Value) != store.MaxDeadLetterPayload || header(dl[0], HeaderSize) != strconv.Itoa(len(value)) ||
			header(dl[0], HeaderDigest) != hex.EncodeToString(sum[:]) || header(dl[0], HeaderReason) == "" {
			t.Errorf("bounded letter: %d bytes, headers %v", len(dl[0].Value), dl[0].Headers)
		}
		eventually(t, "offsets committed past the poison", func() bool { return r.committed(t, c.cfg.Group) == 4 })
	})
}

// TestMissingDeadLetterTopicQuarantines: with no dead-letter topic, an
// unsigned message is quarantined in the orders database and the
// partition drains.
func TestMissingDeadLetterTopicQuarantines(t *testing.T) {
	t.Parallel()
	runTest(t, func(t *testing.T, r *rig) {
		forged := r.occupy(t, skuID, 21)
		r.produceRaw(t, "u", forged.Encode(nil))
		msgs := r.genuineBehind(t, "u", 3)
		cfg := testConfig(t, r)
		cfg.DLQTopic = "seckill.orders.dlq.missing"
		c, err := New(cfg, r.st, r.stock, r.res, zaptest.NewLogger(t), r.registry(t))
		if err != nil {
			t.Fatal(err)
		}
		go c.Run(context.Background())
		t.Cleanup(func() { c.Close() })
		r.wantOrdered(t, msgs)
		q := r.quarantined(t, 1)
		if q[0].Reason != sale.ErrUnsigned.Error() || q[0].RequestNo != forged.RequestNo || string(q[0].Payload) != string(forged.Encode(nil)) {
			t.Errorf("quarantined %+v", q[0])
		}
		eventually(t, "offsets committed past the poison", func() bool { return r.committed(t, cfg.Group) == 4 })
		// The unsigned copy named a ticket the consumer does not touch:
		// it stays as the engine left it, for the sweeper.
		if e, err := r.res.Read(context.Background(), forged.UserID, forged.RequestNo); err != nil || e.State != sale.ResultQueuing {
			t.Errorf("the named ticket was touched: %+v %v", e, err)
		}
		evs, err := r.st.RequestEvents(context.Background(), forged.RequestNo)
		if err != nil || len(evs) != 1 || evs[0].Status != store.EventDeadLettered {
			t.Errorf("history of the named ticket %+v, %v; want its DEAD_LETTERED step", evs, err)
		}
	})
}

// TestRefusingDeadLetterBrokerQuarantines: a broker that refuses every
// produce to the dead-letter topic (an ACL) gets the letters quarantined;
// the partition drains.
func TestRefusingDeadLetterBrokerQuarantines(t *testing.T) {
	t.Parallel()
	runTest(t, func(t *testing.T, r *rig) {
		var refused atomic.Int32
		r.kafka.Cluster.ControlKey(kmsg.Produce.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
			r.kafka.Cluster.KeepControl()
			pr := req.(*kmsg.ProduceRequest)
			for _, tp := range pr.Topics {
				if tp.Topic != sale.DLQTopic {
					return nil, nil, false
				}
			}
			refused.Add(1)
			resp := pr.ResponseKind().(*kmsg.ProduceResponse)
			resp.SetVersion(pr.GetVersion())
			for _, tp := range pr.Topics {
				rt := kmsg.NewProduceResponseTopic()
				rt.Topic = tp.Topic
				for _, p := range tp.Partitions {
					rp := kmsg.NewProduceResponseTopicPartition()
					rp.Partition = p.Partition
					rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return resp, nil, true
		})
		held := r.occupy(t, skuID, 21)
		forger, err := sale.NewSigner(sale.SigningConfig{Keys: []keyring.Key{{ID: testSigning.Keys[0].ID, Secret: "a-guessed-secret-0123456789abcdef"}}})
		if err != nil {
			t.Fatal(err)
		}
		r.produceRaw(t, "u", forger.AppendSigned(nil, &held))
		r.produceRaw(t, "u", []byte("not json at all \xff"))
		msgs := r.genuineBehind(t, "u", 3)
		c := r.start(t)
		r.wantOrdered(t, msgs)
		q := r.quarantined(t, 2)
		if q[0].Reason != sale.ErrBadSignature.Error() || q[0].RequestNo != held.RequestNo || !strings.Contains(q[1].Reason, "decode") {
			t.Errorf("quarantined %+v", q)
		}
		eventually(t, "offsets committed past the poison", func() bool { return r.committed(t, c.cfg.Group) == 5 })
		if refused.Load() == 0 {
			t.Error("the broker refused nothing")
		}
		// The genuine message of the held ticket still makes its order.
		r.produce(t, held)
		if e := r.result(t, held.RequestNo); e.State != sale.ResultSuccess {
			t.Errorf("held ticket: %+v", e)
		}
	})
}

// TestCloseDoesNotWaitOnABatchThatCannotComplete: with the database down,
// Close returns within the drain bound; the batch stays uncommitted.
func TestCloseDoesNotWaitOnABatchThatCannotComplete(t *testing.T) {
	t.Parallel()
	runTest(t, func(t *testing.T, r *rig) {
		f := &flakyStore{Store: r.st}
		f.down.Store(true)
		m := r.occupy(t, skuID, 10)
		r.produce(t, m)
		cfg := testConfig(t, r)
		cfg.Retries, cfg.RetryBackoff = 20, 200*time.Millisecond // ~2 minutes of retries per batch
		cfg.DrainTimeout = 500 * time.Millisecond
		c, err := New(cfg, f, r.stock, r.res, zaptest.NewLogger(t), r.registry(t))
		if err != nil {
			t.Fatal(err)
		}
		ran := make(chan error, 1)
		go func() { ran <- c.Run(context.Background()) }()
		eventually(t, "the batch retrying", func() bool { return f.attempts.Load() > 1 })
		start := time.Now()
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		<-ran
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("Close took %v with a drain bound of %v", d, cfg.DrainTimeout)
		}
		if got := r.committed(t, cfg.Group); got != 0 {
			t.Errorf("committed %d", got)
		}
	})
}
