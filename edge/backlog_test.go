package edge

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"seckill/internal/lag"
	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/stock/results"
)

// fakeGroup is a consumer group the backlog guard samples: it commits at
// rate messages per second of real time (0: stalled) and has lag messages
// waiting; or its offsets cannot be read.
type fakeGroup struct {
	mu        sync.Mutex
	committed float64
	rate      float64
	lag       int64
	last      time.Time
	err       error
}

func (g *fakeGroup) set(rate float64, lag int64, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.rate, g.lag, g.err = rate, lag, err
}

func (g *fakeGroup) read(context.Context) (lag.Offsets, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	if !g.last.IsZero() {
		g.committed += g.rate * now.Sub(g.last).Seconds()
	}
	g.last = now
	if g.err != nil {
		return lag.Offsets{}, g.err
	}
	c := int64(g.committed)
	return lag.Offsets{Newest: c + g.lag, Committed: c}, nil
}

func backlogEdge(t *testing.T, g *fakeGroup) *edgeEnv {
	return newEdge(t, withOptions(WithBacklog(Backlog{High: 4 * time.Second, Low: time.Second, Every: 10 * time.Millisecond, Read: g.read})))
}

func buyAs(e *edgeEnv, user int) response {
	e.t.Helper()
	return e.order(strconv.Itoa(user), `{"activityId":7,"skuId":1001,"quantity":1}`)
}

// The consumers drain 200 messages a second with 2,000 waiting (10 s of
// drain, over lag_high 4 s): the edge admits about half the drain rate
// (a second's burst of 100, then 100 a second) and answers the rest 429
// BACKLOG with the time the lag needs to come down to lag_low (10 − 1 s);
// results and the activity stay readable; once the lag needs at most
// lag_low it admits everyone again by itself.
func TestBacklogShrinksAdmissionAndRecovers(t *testing.T) {
	g := &fakeGroup{}
	g.set(200, 0, nil)
	e := backlogEdge(t, g)
	if r := buyAs(e, 1); r.status != 200 {
		t.Fatalf("no backlog: %d %s", r.status, r.raw)
	}
	g.set(200, 2000, nil)
	waitFor(t, "the guard sees the backlog", func() bool { return e.srv.admit.backlog.shedding.Load() })
	if v := testenv.Metric(t, e.reg, "seckill_edge_backlog_shedding", nil); v != 1 {
		t.Errorf("seckill_edge_backlog_shedding %v while shedding", v)
	}
	if v := testenv.Metric(t, e.reg, "seckill_edge_backlog_seconds", nil); v < 8 || v > 12 {
		t.Errorf("seckill_edge_backlog_seconds %v, want about 10", v)
	}
	accepted, backlog := 0, 0
	t0 := time.Now()
	for u := 100; u < 400; u++ {
		switch r := buyAs(e, u); {
		case r.status == 200:
			accepted++
		case r.status == 429 && r.code() == "BACKLOG":
			backlog++
			if ra, err := strconv.Atoi(r.header["Retry-After"]); err != nil || ra < 8 || ra > 10 {
				t.Fatalf("429 BACKLOG with Retry-After %q, want about 9", r.header["Retry-After"])
			}
		default:
			t.Fatalf("while shedding: %d %s", r.status, r.raw)
		}
	}
	// The burst of one second of 100 a second, and what accrued while
	// the attempts were sent (the measured rate may run a little high).
	took := time.Since(t0)
	if most := 110 + int(130*took.Seconds()); accepted < 20 || accepted > most || backlog == 0 {
		t.Fatalf("while shedding: %d accepted, %d 429 BACKLOG of 300 in %v; want 20..%d accepted", accepted, backlog, took, most)
	}
	if v := testenv.Metric(t, e.reg, "seckill_edge_rejections_total", map[string]string{"reason": "backlog"}); v != float64(backlog) {
		t.Errorf("rejections{reason=backlog} %v, want %d", v, backlog)
	}
	const rn = "7-1001-385465232614494208"
	if err := e.res.Write(t.Context(), results.Entry{RequestNo: rn, Activity: 7, SKU: 1001, Owner: 5, State: sale.ResultQueuing}); err != nil {
		t.Fatal(err)
	}
	if r := e.do("GET", "/api/v1/flash-sale/result/"+rn, "5", ""); r.status != 200 || r.code() != "QUEUING" {
		t.Errorf("a result while shedding: %d %s", r.status, r.raw)
	}
	if r := e.do("GET", "/api/v1/flash-sale/activities/7", "", ""); r.status != 200 {
		t.Errorf("the activity while shedding: %d %s", r.status, r.raw)
	}

	// Between lag_low and lag_high: still shedding (hysteresis).
	g.set(200, 500, nil)
	time.Sleep(100 * time.Millisecond)
	if !e.srv.admit.backlog.shedding.Load() {
		t.Fatal("the gate opened at 2.5 s of drain, above lag_low")
	}
	g.set(200, 100, nil)
	waitFor(t, "the gate opens again below lag_low", func() bool { return !e.srv.admit.backlog.shedding.Load() })
	for u := 1000; u < 1100; u++ {
		if r := buyAs(e, u); r.status != 200 {
			t.Fatalf("after recovery: %d %s", r.status, r.raw)
		}
	}
	if v := testenv.Metric(t, e.reg, "seckill_edge_backlog_shedding", nil); v != 0 {
		t.Errorf("seckill_edge_backlog_shedding %v after recovery", v)
	}
}

// A group that commits nothing while messages wait needs ever longer:
// once the lag has waited past lag_high every purchase is refused (the
// drain rate it admits a share of is zero), with a Retry-After.
func TestBacklogStalledGroupRefusesEveryPurchase(t *testing.T) {
	g := &fakeGroup{}
	g.set(0, 30, nil)
	e := newEdge(t, withOptions(WithBacklog(Backlog{High: 300 * time.Millisecond, Low: 100 * time.Millisecond, Every: 10 * time.Millisecond, Read: g.read})))
	waitFor(t, "the guard sees the stall", func() bool { return e.srv.admit.backlog.shedding.Load() })
	if v := testenv.Metric(t, e.reg, "seckill_edge_backlog_seconds", nil); v < 0.3 {
		t.Errorf("seckill_edge_backlog_seconds %v, want past lag_high", v)
	}
	for u := 1; u <= 50; u++ {
		r := buyAs(e, u)
		if ra, err := strconv.Atoi(r.header["Retry-After"]); r.status != 429 || r.code() != "BACKLOG" || err != nil || ra < 1 {
			t.Fatalf("purchase %d while stalled: %d %q %s", u, r.status, r.header["Retry-After"], r.raw)
		}
	}
	if n := e.eng.calls.Load(); n != 0 {
		t.Fatalf("%d engine calls while the group is stalled", n)
	}
}

// An edge that cannot read the offsets does not keep refusing buyers on
// an old reading: after a few failed samples it admits everyone again.
func TestBacklogUnreadableOffsetsOpenTheGate(t *testing.T) {
	g := &fakeGroup{}
	g.set(0, 30, nil)
	e := backlogEdge(t, g)
	waitFor(t, "the guard sees the stall", func() bool { return e.srv.admit.backlog.shedding.Load() })
	g.set(0, 30, errors.New("broker away"))
	waitFor(t, "the gate opens after unreadable samples", func() bool { return !e.srv.admit.backlog.shedding.Load() })
	if r := buyAs(e, 1); r.status != 200 {
		t.Fatalf("with the offsets unreadable: %d %s", r.status, r.raw)
	}
}

func TestBacklogRetry(t *testing.T) {
	low := 10 * time.Second
	for _, tc := range []struct {
		seconds float64
		want    time.Duration
	}{
		{25, 15 * time.Second},
		{10.5, time.Second}, // at least a second
		{300, time.Minute},  // at most a minute
	} {
		if got := backlogRetry(tc.seconds, low); got != tc.want {
			t.Errorf("backlogRetry(%v) = %v, want %v", tc.seconds, got, tc.want)
		}
	}
}

// A consumer coming back from a failed batch drains slowly for a moment:
// one slow reading, or four, turns nobody away; the fifth in a row does.
func TestBacklogSustainedOverHighOnly(t *testing.T) {
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var live atomic.Int64
	live.Store(1)
	log := zaptest.NewLogger(t)
	b := newBacklog(Backlog{High: 2 * time.Second, Low: time.Second, Every: time.Second}, &live, m, log, &rareWarner{log: log})
	t0 := time.Unix(1000, 0)
	var committed, newest int64
	sample := func(s int, commit, arrive int64) {
		committed, newest = committed+commit, newest+arrive
		b.observe(t0.Add(time.Duration(s)*time.Second), lag2offsets(committed, newest-committed))
	}
	sample(0, 100, 1100)
	for s := 1; s <= 4; s++ {
		sample(s, 100, 100) // 1,000 waiting at 100 a second, over High
	}
	if b.shedding.Load() {
		t.Fatal("shedding after four readings over lag_high")
	}
	sample(5, 1000, 100) // 100 waiting at ~280 a second: back under
	sample(6, 100, 1000)
	for s := 7; s <= 9; s++ {
		sample(s, 100, 100)
	}
	if b.shedding.Load() {
		t.Fatal("shedding after a reading under lag_high broke the run")
	}
	sample(10, 100, 100)
	if !b.shedding.Load() {
		t.Fatal("not shedding after five readings in a row over lag_high")
	}
}

func lag2offsets(committed, n int64) lag.Offsets {
	return lag.Offsets{Newest: committed + n, Committed: committed}
}

// The consumers of a sale that kept up (one commit a second of all that
// arrived: never seen busy) slow down to one batch every 4 s, each of what
// waited when it began: sampled every 250 ms with lag_high 3 s, the gate
// shrinks, though no stall between two commits lasts five samples past
// lag_high. And a group never seen busy that stalled, then commits a part
// of its lag, has not drained: the gate stays shrunk until the lag is
// gone.
func TestBacklogSlowStepsShrinkAndACommitIsNoDrain(t *testing.T) {
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var live atomic.Int64
	live.Store(1)
	log := zaptest.NewLogger(t)
	every := 250 * time.Millisecond
	cfg := Backlog{High: 3 * time.Second, Low: time.Second, Every: every}
	b := newBacklog(cfg, &live, m, log, &rareWarner{log: log})
	t0 := time.Unix(1000, 0)
	var newest, committed, batch int64
	shrunkAt := -1
	for i := 0; i <= 16*4; i++ { // 16 s at 4 samples a second
		newest += 30 // 120 arrivals a second
		switch {
		case i <= 16 && i%4 == 0: // keeping up: commits all each second
			committed, batch = newest, newest
		case i == 17: // slow: a batch of what waits when it begins,
			batch = newest // committed 4 s later
		case i > 17 && (i-17)%16 == 0:
			committed, batch = batch, newest
		}
		b.observe(t0.Add(time.Duration(i)*every), lag2offsets(committed, newest-committed))
		if shrunkAt < 0 && b.shedding.Load() {
			shrunkAt = i
		}
	}
	if shrunkAt < 0 || shrunkAt > 12*4 {
		t.Fatalf("gate shrunk at sample %d, want by 12 s (sample 48): a group that commits every 4 s what waited 4 s before", shrunkAt)
	}

	b = newBacklog(cfg, &live, m, log, &rareWarner{log: log})
	newest, committed = 1000, 1000
	at := t0
	obs := func() {
		at = at.Add(every)
		b.observe(at, lag2offsets(committed, newest-committed))
	}
	obs()
	newest = 2000
	for range 5 * 4 {
		obs()
	}
	if !b.shedding.Load() {
		t.Fatal("a 5 s stall with 1,000 waiting did not shrink the gate")
	}
	committed += 200
	obs()
	obs()
	if !b.shedding.Load() {
		t.Fatal("one commit of 200 of 1,000 waiting, the rate unknown, opened the gate")
	}
	committed = newest
	obs()
	if b.shedding.Load() {
		t.Fatal("the gate stayed shrunk with no lag")
	}
}
