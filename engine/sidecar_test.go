package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"seckill/internal/testenv"
)

func TestSidecarDownAnswersBusyFastAndRecovers(t *testing.T) {
	r := newRig(t)
	k := testenv.StartKafka(t, 1)
	loc := newLocal(t, r, k.Addrs)
	r.preheat(t, activity(1, 1001, 100, false))
	addr := "unix://" + t.TempDir() + "/engine.sock"
	c := NewClient(addr, ClientConfig{Timeout: time.Second, BreakAfter: 3, Cooldown: 200 * time.Millisecond})
	ctx := context.Background()

	// Nothing listens yet: busy, quickly, and after 3 failures the circuit
	// answers without dialing at all.
	for i := 0; i < 10; i++ {
		start := time.Now()
		_, err := c.Occupy(ctx, r.order(t, 1001, int64(i+1)))
		if !errors.Is(err, ErrBusy) {
			t.Fatalf("call %d with the sidecar down: %v, want ErrBusy", i, err)
		}
		if d := time.Since(start); d > 1500*time.Millisecond {
			t.Fatalf("call %d took %v", i, d)
		}
	}
	if c.openTill.Load() == 0 {
		t.Fatal("the circuit did not open")
	}

	// The sidecar comes up: after the cooldown the client recovers alone.
	serveSidecar(t, loc, r.cat, addr)
	var tk Ticket
	testenv.EventuallyOK(t, "the client to recover", 5*time.Second, func() error {
		var err error
		tk, err = c.Occupy(ctx, r.order(t, 1001, 100))
		if err != nil && !errors.Is(err, ErrBusy) {
			t.Fatalf("no recovery: %v", err)
		}
		return err
	})
	if tk.RequestNo == "" || tk.Remaining != 99 {
		t.Fatalf("ticket after recovery: %+v", tk)
	}
}

func TestSidecarProtocolRejectsGarbage(t *testing.T) {
	// The edge always resolves an activity: 0 is nonsense on the wire.
	for _, body := range []string{"", "1,2,3", "a,b,c,d,e", "1,0,3,1,x", "1,2,-3,1,x", "1,2,3,0,x", "0,1001,42,1,x", "-7,1001,42,1,x"} {
		var w wireRequest
		if err := parseOccupy([]byte(body), &w); err == nil {
			t.Errorf("body %q accepted as %+v", body, w)
		}
	}
	var w wireRequest
	if err := parseOccupy([]byte("7,1001,42,2,trace-x"), &w); err != nil || w.activity != 7 || w.sku != 1001 || w.user != 42 || w.quantity != 2 || w.traceID != "trace-x" {
		t.Fatalf("good body: %+v %v", w, err)
	}
}
