package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"seckill/internal/sale"
	"seckill/internal/testenv"
)

// TestFailResultIsWrittenOnceRedisIsBack: the default Redis (results) goes
// away between the occupy on the hot shard and the QUEUING write. The engine
// releases the ticket and answers busy, but its FAIL result cannot be
// written then; once Redis answers again the engine writes it, so a result
// that may have reached Redis as QUEUING does not tell a released ticket is
// on its way for 48 hours.
func TestFailResultIsWrittenOnceRedisIsBack(t *testing.T) {
	r := newRig(t)
	k := testenv.StartKafka(t, 1)
	r.preheat(t, activity(1, 7001, 5, true)) // on the hot shard
	core, logs := observer.New(zap.WarnLevel)
	cfg := DefaultConfig()
	cfg.Kafka.Brokers = k.Addrs
	cfg.OccupyTimeout = 200 * time.Millisecond
	cfg.Signing = testSigning
	stopped := false
	e, err := New(cfg, r.stock, r.res, zap.New(core), nil, WithFault(func(stage string) error {
		if stage == "after_occupy" && !stopped {
			stopped = true
			r.def.Stop()
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })

	if _, err := e.Occupy(context.Background(), r.order(t, 7001, 42)); err == nil {
		t.Fatal("occupy answered a ticket while the results' Redis was down")
	}
	released := logs.FilterMessage("ticket released after failure").All()
	if len(released) != 1 {
		t.Fatalf("%d release log lines, want 1", len(released))
	}
	rn, _ := released[0].ContextMap()["requestNo"].(string)
	if rn == "" {
		t.Fatalf("no requestNo in %v", released[0].ContextMap())
	}
	if c := r.counts(t, 1, 7001); c.Remaining != 5 || c.Holders != 0 {
		t.Fatalf("counts after the release: %+v, want 5 remaining and no holder", c)
	}

	if err := r.def.Start(); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyOK(t, "the FAIL result written once Redis is back", 10*time.Second, func() error {
		got, err := r.res.Read(context.Background(), rn)
		if err != nil {
			return err
		}
		if got.State != sale.ResultFail || got.Code != sale.FailBusy || got.Owner != 42 {
			return fmt.Errorf("result %+v", got)
		}
		return nil
	})
}
