package edge

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"seckill/engine"
	"seckill/stock"
)

func TestQuickestSampleWins(t *testing.T) {
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	// The source runs 1s ahead; each sample read it somewhere within its
	// round trip, the slow ones far from the midpoint.
	samples := []clockSample{
		{sent: base, rtt: 40 * time.Millisecond, ref: base.Add(time.Second + 39*time.Millisecond)},
		{sent: base.Add(time.Second), rtt: 2 * time.Millisecond, ref: base.Add(2*time.Second + time.Millisecond)},
		{sent: base.Add(2 * time.Second), rtt: -time.Millisecond, ref: base}, // a clock stepped back
		{sent: base.Add(3 * time.Second), rtt: 30 * time.Millisecond, ref: base.Add(4 * time.Second)},
		{sent: base.Add(4 * time.Second), rtt: 2 * time.Millisecond, ref: base.Add(5 * time.Second)}, // as quick, later
	}
	best, ok := quickest(samples)
	if !ok {
		t.Fatal("no sample chosen")
	}
	if best != samples[1] {
		t.Fatalf("chose %+v, want the first quickest %+v", best, samples[1])
	}
	if got := best.offset(); got != time.Second {
		t.Fatalf("offset %v, want 1s (the source's read at the midpoint)", got)
	}
	if _, ok := quickest(samples[2:3]); ok {
		t.Fatal("a negative round trip was chosen")
	}
	if _, ok := quickest(nil); ok {
		t.Fatal("a sample was chosen from none")
	}
}

// scripted is a local clock that advances by the next step on each read.
type scripted struct {
	t     time.Time
	steps []time.Duration
}

func (s *scripted) now() time.Time {
	if len(s.steps) > 0 {
		s.t = s.t.Add(s.steps[0])
		s.steps = s.steps[1:]
	}
	return s.t
}

func TestSyncKeepsTheQuickestSample(t *testing.T) {
	// Six reads (send, receive) with round trips 30, 10, 4, 20, 4, 50ms;
	// the source is 5s ahead and reads its clock at the very end of each
	// round trip, the worst case for a midpoint estimate.
	rtts := []time.Duration{30, 10, 4, 20, 4, 50}
	local := &scripted{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, r := range rtts {
		local.steps = append(local.steps, time.Millisecond, r*time.Millisecond)
	}
	c := &serverClock{local: local.now}
	reads := 0
	c.source = func(context.Context) (time.Time, error) {
		r := rtts[reads] * time.Millisecond
		reads++
		return local.t.Add(r + 5*time.Second), nil
	}
	if err := c.sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The quickest round trip is 4ms: the estimate is off by half of it.
	if got, want := time.Duration(c.offset.Load()), 5*time.Second+2*time.Millisecond; got != want {
		t.Fatalf("offset %v, want %v", got, want)
	}
	if got, want := time.Duration(c.slack()), 2*time.Millisecond+clockDriftSlack; got != want {
		t.Fatalf("slack %v, want %v", got, want)
	}
	if reads != clockSamples {
		t.Fatalf("sync took %d samples, want %d", reads, clockSamples)
	}
}

func TestSyncSkipsFailedReadsAndKeepsTheOffsetWhenAllFail(t *testing.T) {
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	n := 0
	c := &serverClock{local: func() time.Time { return base }}
	c.source = func(context.Context) (time.Time, error) {
		n++
		if n%2 == 1 {
			return time.Time{}, errors.New("busy")
		}
		return base.Add(time.Minute), nil
	}
	if err := c.sync(t.Context()); err != nil {
		t.Fatalf("some reads succeeded: %v", err)
	}
	if got := time.Duration(c.offset.Load()); got != time.Minute {
		t.Fatalf("offset %v, want 1m", got)
	}
	boom := errors.New("down")
	c.source = func(context.Context) (time.Time, error) { return time.Time{}, boom }
	if err := c.sync(t.Context()); !errors.Is(err, boom) {
		t.Fatalf("sync with every read failing: %v", err)
	}
	if got := time.Duration(c.offset.Load()); got != time.Minute {
		t.Fatalf("a failed sync changed the offset to %v", got)
	}
	// A cancelled context stops the sync at the first failed read.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	n = 0
	c.source = func(ctx context.Context) (time.Time, error) { n++; return time.Time{}, ctx.Err() }
	if err := c.sync(ctx); !errors.Is(err, context.Canceled) || n != 1 {
		t.Fatalf("sync after cancel: %v after %d reads", err, n)
	}
}

func TestSyncBracketsRedisTime(t *testing.T) {
	// redis-server runs on this machine and reads the same clock, so a
	// local clock a minute slow is exactly a minute behind Redis (TIME
	// has microseconds). The estimate must be within half the quickest
	// round trip of that, and agree with a direct TIME read bracketed by
	// the local clock, however loaded the machine: no absolute timing is
	// assumed, only the round trips measured.
	e := newEdge(t, withRealClock())
	const skew = time.Minute
	local := func() time.Time { return time.Now().Add(-skew) }
	c := &serverClock{local: local, source: redisTime(e.rdb)}
	for range 3 {
		if err := c.sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		off := time.Duration(c.offset.Load())
		half := time.Duration(c.slack()) - clockDriftSlack // the quickest rtt/2
		if d := (off - skew).Abs(); d > half+time.Microsecond {
			t.Fatalf("offset %v is %v from the true %v; the quickest round trip allows %v", off, d, skew, half)
		}
		// A direct read: Redis' time is within [ref, ref+1µs) at a local
		// time within [t0, t1], so the true offset is in
		// [ref-t1, ref+1µs-t0], and in off±half by the estimate.
		t0 := local()
		ref, err := redisTime(e.rdb)(t.Context())
		t1 := local()
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := ref.Sub(t1), ref.Add(time.Microsecond).Sub(t0)
		if off+half < lo || off-half > hi {
			t.Fatalf("estimate %v±%v misses a direct read's [%v, %v]", off, half, lo, hi)
		}
	}
	// The edge itself synced at start against the same clock.
	if off, half := time.Duration(e.srv.clock.offset.Load()), time.Duration(e.srv.clock.slack())-clockDriftSlack; off.Abs() > half+time.Microsecond {
		t.Fatalf("edge offset to a local redis-server is %v, beyond its bound %v", off, half)
	}
}

func TestSyncDoesNotAllocateOnTheHotPath(t *testing.T) {
	c := &serverClock{local: time.Now}
	c.offset.Store(int64(time.Second))
	if n := testing.AllocsPerRun(100, func() { _, _ = c.now(), c.slack() }); n != 0 {
		t.Fatalf("now and slack allocate %v times", n)
	}
}

func TestWindowEdgesLeaveTheClockSlackToTheEngine(t *testing.T) {
	// The time source reads the test clock itself: offset 0, and a round
	// trip takes no time on it, so the slack is clockDriftSlack exactly.
	// Within it of the start or the end, the edge lets the request through
	// and the engine (by Redis time) decides; beyond it, the edge refuses.
	var clk atomic.Pointer[testClock]
	e := newEdge(t, withOptions(WithTimeSource(func(context.Context) (time.Time, error) {
		c := clk.Load()
		if c == nil {
			return time.Time{}, errors.New("not yet")
		}
		return c.now(), nil
	})))
	clk.Store(e.clock)
	if err := e.srv.clock.sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := time.Duration(e.srv.clock.slack()); got != clockDriftSlack {
		t.Fatalf("slack %v, want %v", got, clockDriftSlack)
	}
	end := saleStart.Add(time.Hour)
	for _, c := range []struct {
		at     time.Time
		status int
	}{
		{saleStart.Add(-clockDriftSlack - 1), 425},
		{saleStart.Add(-clockDriftSlack), 200},
		{end.Add(clockDriftSlack - 1), 200},
		{end.Add(clockDriftSlack), 410},
	} {
		e.clock.set(c.at)
		if r := e.order("5", `{"skuId":1001}`); r.status != c.status {
			t.Fatalf("at %v: %d %s, want %d", c.at.Sub(saleStart), r.status, r.raw, c.status)
		}
	}
	if n := e.eng.calls.Load(); n != 2 {
		t.Fatalf("the engine was asked %d times, want the 2 borderline requests", n)
	}
	// The engine refuses a borderline request by Redis time: the edge
	// answers its verdict and does not take it for a stale catalog.
	e.eng.answer(func(*engine.Request) (engine.Ticket, error) { return engine.Ticket{Remaining: -1}, stock.ErrEnded })
	e.clock.set(end)
	if r := e.order("6", `{"skuId":1001}`); r.status != 410 {
		t.Fatalf("the engine's ended: %d %s", r.status, r.raw)
	}
	if e.srv.views.lastDisagree.Load() != 0 {
		t.Fatal("a borderline refusal by the engine triggered a catalog reload")
	}
}
