package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"seckill/internal/testenv"
	"seckill/sale"
)

// steps records what the engine hands its request log: the steps of
// tickets, and apart from them the refusals (RefusalLog).
type steps struct {
	mu      sync.Mutex
	got     []string
	refused []string // "REASON detail"
}

func (s *steps) Record(m *sale.Message, state, remark string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, m.RequestNo+" "+state)
}

func (s *steps) Refused(activity, sku, user, quantity int64, reason, detail, traceID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused = append(s.refused, reason+" "+detail)
}

func TestCompensationIsRecordedInTheRequestLog(t *testing.T) {
	r := newRig(t)
	k := testenv.StartKafka(t, 1)
	log := &steps{}
	e := newLocal(t, r, k.Addrs, WithRequestLog(log))
	r.preheat(t, activity(1, 1001, 5, false))
	ctx := context.Background()
	ok, err := e.Occupy(ctx, r.order(t, 1001, 1))
	if err != nil {
		t.Fatal(err)
	}
	k.Cluster.Close()
	if _, err := e.Occupy(ctx, r.order(t, 1001, 2)); !errors.Is(err, ErrBusy) {
		t.Fatalf("occupy with the broker gone: %v", err)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.got) != 2 {
		t.Fatalf("steps %v, want COMPENSATING and FAILED of the failed ticket only", log.got)
	}
	for i, want := range []string{StateCompensating, StateFailed} {
		if rn, state, _ := strings.Cut(log.got[i], " "); state != want || rn == ok.RequestNo {
			t.Errorf("step %d = %q, want %s of the failed ticket", i, log.got[i], want)
		}
	}
}

// TestDrainedAttemptReleasedLeavesTheRequestLogAlone: a drained attempt
// (a Request with its Place in line) whose order message fails is
// released and WAITING again at its place; its story goes on with the
// drainer's retry (an order message, or FAILED when the line refuses it),
// so the request log gets no step for it here — a COMPENSATING row would
// tell of a compensation the buyer never sees.
func TestDrainedAttemptReleasedLeavesTheRequestLogAlone(t *testing.T) {
	r := newRig(t)
	k := testenv.StartKafka(t, 1)
	log := &steps{}
	e := newLocal(t, r, k.Addrs, WithRequestLog(log))
	r.preheat(t, activity(1, 1001, 5, false))
	k.Cluster.Close()
	req := r.order(t, 1001, 3)
	req.RequestNo, req.Place = sale.NewRequestNos(1).Next(1, 1001), "0:7"
	if _, err := e.Occupy(context.Background(), req); !errors.Is(err, ErrBusy) {
		t.Fatalf("occupy with the broker gone: %v", err)
	}
	res, err := r.res.Read(context.Background(), req.UserID, req.RequestNo)
	if err != nil || res.State != sale.ResultWaiting || res.Code != "0:7" {
		t.Fatalf("result %+v %v, want WAITING at 0:7", res, err)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.got) != 0 {
		t.Fatalf("request-log steps %v, want none", log.got)
	}
}
