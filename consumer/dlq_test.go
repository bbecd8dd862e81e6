package consumer

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"go.uber.org/zap/zaptest"

	"seckill/internal/sale"
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

// TestDeadLetterOutageLosesNoLetter: a poison ticket whose dead letter
// cannot be sent keeps its stock until the batch comes back, so the
// redelivery fails it again and the letter is sent; the ticket is released
// once and answered FAIL.
func TestDeadLetterOutageLosesNoLetter(t *testing.T) {
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
		dl := r.readDLQ(t, 1)
		if string(dl[0].Value) != string(signed(&bad)) {
			t.Errorf("dead letter %q", dl[0].Value)
		}
		eventually(t, "offset committed", func() bool { return r.committed(t, c.cfg.Group) == 1 })
		if n := f.sends.Load(); n < 2 {
			t.Errorf("%d dead-letter sends, want the failed one and its retry", n)
		}
		n, err := r.stock.Counts(ctx, 8, 8001)
		if err != nil || n.Remaining != 3 || n.Sold != 0 || n.Holders != 0 || n.Claimed != 0 {
			t.Errorf("redis after the poison ticket: %+v, %v; want its one unit back exactly once", n, err)
		}
		e, err := r.st.RequestLog(ctx, bad.RequestNo)
		if err != nil || e.Status != store.StatusFailed || !strings.Contains(e.Remark, "order failed") {
			t.Errorf("request log %+v, %v", e, err)
		}
		eventually(t, "failed counted once", func() bool { return count(t, r, outFailed) == 1 })
		time.Sleep(50 * time.Millisecond)
		if got := count(t, r, outFailed); got != 1 {
			t.Errorf("failed counted %d times", got)
		}
	})
}

// TestOrderedTicketsTellTheirStory: the request log of a ticket that
// became an order reads SUCCESS, with every step in its history.
func TestOrderedTicketsTellTheirStory(t *testing.T) {
	t.Parallel()
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		m := r.occupy(t, skuID, 21)
		r.produce(t, m)
		r.start(t)
		if e := r.result(t, m.RequestNo); e.State != sale.ResultSuccess {
			t.Fatalf("result %+v", e)
		}
		var got []string
		eventually(t, "SUCCESS in the request log", func() bool {
			e, err := r.st.RequestLog(ctx, m.RequestNo)
			return err == nil && e.Status == store.StatusSuccess
		})
		evs, err := r.st.RequestEvents(ctx, m.RequestNo)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			got = append(got, e.Status)
		}
		want := []string{store.StatusStockOccupied, store.StatusMQQueued, store.StatusOrderCreated, store.StatusSuccess}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("history %v, want %v", got, want)
		}
	})
}
