package edge

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestSetRateAppliesLiveKeepsUnchangedStateAndRefusesInvalid(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	e := newEdge(t, withLogger(zap.New(core)))
	for range 3 {
		mustStatus(t, e.order("5", `{"skuId":1001}`), 200, "QUEUING")
	}

	// Per-user limit on, one request per 1000 s: the second is refused.
	c := e.srv.Rate()
	c.UserPerSecond, c.UserBurst = 0.001, 1
	c.SKUInflight, c.GateEdges, c.SKUInflightWait = 7, 2, 3*time.Second
	changes, err := e.srv.SetRate(c)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"edge.rate.user_per_second: 0 → 0.001", "edge.rate.user_burst: 0 → 1", "edge.rate.gate_edges: 0 → 2", "edge.rate.sku_inflight: 0 → 7", "edge.rate.sku_inflight_wait: 0s → 3s"}
	if strings.Join(changes, "; ") != strings.Join(want, "; ") {
		t.Fatalf("changes %q, want %q", changes, want)
	}
	if l := logs.FilterMessage("edge rate limits reloaded").All(); len(l) != 1 || !strings.Contains(fmt.Sprint(l[0].ContextMap()["changed"]), want[1]) {
		t.Fatalf("reload log lines %v, want one naming the changes", l)
	}
	mustStatus(t, e.order("6", `{"skuId":1001}`), 200, "QUEUING")
	mustRateLimited(t, e.order("6", `{"skuId":1001}`), reasonRateUser)
	if n, w := e.srv.admit.inflight.Limit(), e.srv.admit.inflight.Wait(); n != 7 || w != 3*time.Second {
		t.Fatalf("in-flight bound %d and wait %v, want 7 and 3s", n, w)
	}

	// Invalid: refused, naming the key; the limits in force stay.
	bad := c
	bad.UserBurst = 0
	if _, err := e.srv.SetRate(bad); err == nil || !strings.Contains(err.Error(), "edge.rate.user_burst") {
		t.Fatalf("invalid settings: error %v, want one naming edge.rate.user_burst", err)
	}
	if got := e.srv.Rate(); got.UserBurst != 1 || got.SKUInflight != 7 {
		t.Fatalf("after a refused reload the limits are %+v", got)
	}
	mustRateLimited(t, e.order("6", `{"skuId":1001}`), reasonRateUser)

	// The same settings again change nothing.
	if changes, err := e.srv.SetRate(c); err != nil || len(changes) != 0 {
		t.Fatalf("same settings: changes %q, err %v", changes, err)
	}
	// Another layer changes: the per-user limiter keeps its state (user 6
	// has spent its burst), it does not hand out fresh bursts.
	c.GateK, c.GateFloor = 5, 50
	if changes, err := e.srv.SetRate(c); err != nil || len(changes) != 2 {
		t.Fatalf("gate change: changes %q, err %v", changes, err)
	}
	mustRateLimited(t, e.order("6", `{"skuId":1001}`), reasonRateUser)

	// Off again.
	c.UserPerSecond = 0
	if _, err := e.srv.SetRate(c); err != nil {
		t.Fatal(err)
	}
	mustStatus(t, e.order("6", `{"skuId":1001}`), 200, "QUEUING")
}

// TestSetRateWhileServing runs reloads against purchases (under -race this
// is the test that the hot path reads its limits safely).
func TestSetRateWhileServing(t *testing.T) {
	e := newEdge(t)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				r := e.order(strconv.Itoa(1000*g+i+1), `{"skuId":1001}`)
				if r.status != 200 && r.status != 429 {
					t.Errorf("got %d %s during reloads", r.status, r.raw)
					return
				}
			}
		}()
	}
	c := e.srv.Rate()
	for i := range 40 {
		c.UserPerSecond, c.UserBurst = float64(i%2)*1000, 1000
		c.GateK, c.GateFloor, c.SKUInflight = float64(i%3), 100, i%5
		if _, err := e.srv.SetRate(c); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}
