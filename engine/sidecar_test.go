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
		_, err := c.Occupy(ctx, &Request{SKUID: 1001, UserID: int64(i + 1), Quantity: 1})
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
	serveSidecar(t, loc, addr)
	deadline := time.Now().Add(5 * time.Second)
	for {
		tk, err := c.Occupy(ctx, &Request{SKUID: 1001, UserID: 100, Quantity: 1})
		if err == nil {
			if tk.RequestNo == "" || tk.Remaining != 99 {
				t.Fatalf("ticket after recovery: %+v", tk)
			}
			break
		}
		if !errors.Is(err, ErrBusy) || time.Now().After(deadline) {
			t.Fatalf("no recovery: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestSidecarProtocolRejectsGarbage(t *testing.T) {
	for _, body := range []string{"", "1,2,3", "a,b,c,d,e", "1,0,3,1,x", "1,2,-3,1,x", "1,2,3,0,x"} {
		var r Request
		if err := parseOccupy([]byte(body), &r); err == nil {
			t.Errorf("body %q accepted as %+v", body, r)
		}
	}
	var r Request
	if err := parseOccupy([]byte("0,1001,42,1,trace-x"), &r); err != nil || r.SKUID != 1001 || r.UserID != 42 || r.TraceID != "trace-x" {
		t.Fatalf("good body: %+v %v", r, err)
	}
}
