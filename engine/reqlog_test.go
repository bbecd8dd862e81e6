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

// steps records what the engine hands its request log.
type steps struct {
	mu  sync.Mutex
	got []string
}

func (s *steps) Record(m *sale.Message, state, remark string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, m.RequestNo+" "+state)
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
