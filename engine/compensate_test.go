package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"seckill/internal/testenv"
	"seckill/sale"
)

// TestFailResultIsWrittenOnceRedisIsBack: the broker is gone, so the
// ticket the occupy script accepted (and wrote QUEUING for) is released,
// and then the SKU's shard — where its result lives — goes away before the
// FAIL result is written. The engine answers busy; once the shard answers
// again it writes FAIL, so the QUEUING the script wrote does not tell a
// released ticket is on its way for 48 hours.
func TestFailResultIsWrittenOnceRedisIsBack(t *testing.T) {
	r := newRig(t)
	k := testenv.StartKafka(t, 1)
	r.preheat(t, activity(1, 7001, 5, true)) // on the hot shard
	core, logs := observer.New(zap.WarnLevel)
	cfg := DefaultConfig()
	cfg.Kafka.Brokers = k.Addrs
	cfg.Kafka.SendTimeout = time.Second
	cfg.OccupyTimeout = 200 * time.Millisecond
	cfg.Signing = testSigning
	var released error
	e, err := New(cfg, r.stock, r.res, zap.New(core), nil, WithFault(func(stage string) error {
		switch stage {
		case "before_produce":
			k.Cluster.Close()
		case "after_release":
			if c := r.counts(t, 1, 7001); c.Remaining != 5 || c.Holders != 0 {
				released = fmt.Errorf("counts after the release: %+v, want 5 remaining and no holder", c)
			}
			r.hot.Stop()
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })

	if _, err := e.Occupy(context.Background(), r.order(t, 7001, 42)); err == nil {
		t.Fatal("occupy answered a ticket while the broker was gone")
	}
	if released != nil {
		t.Fatal(released)
	}
	lines := logs.FilterMessage("ticket released after failure").All()
	if len(lines) != 1 {
		t.Fatalf("%d release log lines, want 1", len(lines))
	}
	rn, _ := lines[0].ContextMap()["requestNo"].(string)
	if rn == "" {
		t.Fatalf("no requestNo in %v", lines[0].ContextMap())
	}

	if err := r.hot.Start(); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyOK(t, "the FAIL result written once the SKU's shard is back", 10*time.Second, func() error {
		got, err := r.res.Read(context.Background(), 0, rn)
		if err != nil {
			return err
		}
		if got.State != sale.ResultFail || got.Code != sale.FailBusy || got.Owner != 42 {
			return fmt.Errorf("result %+v", got)
		}
		return nil
	})
	// It was written where the requestNo says, on the hot shard.
	if n, err := r.hot.Do(t, "HEXISTS", sale.ResultsKey(1, 7001), rn).AsInt64(); err != nil || n != 1 {
		t.Fatalf("the hot shard holds %d results %s in %s (%v)", n, rn, sale.ResultsKey(1, 7001), err)
	}
}
