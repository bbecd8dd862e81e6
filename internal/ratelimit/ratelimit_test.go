package ratelimit

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestLocalTripsAndRecovers(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	l := NewLocal(10, 3, 1000, c.now) // 10/s, burst 3
	for i := 0; i < 3; i++ {
		if ok, _ := l.Allow(7); !ok {
			t.Fatalf("burst event %d refused", i)
		}
	}
	ok, wait := l.Allow(7)
	if ok || wait <= 0 || wait > 100*time.Millisecond {
		t.Fatalf("4th event: ok=%v wait=%v, want refused with wait ≤ 100ms", ok, wait)
	}
	if ok, _ := l.Allow(8); !ok {
		t.Fatal("another key must not be limited")
	}
	c.add(wait)
	if ok, _ := l.Allow(7); !ok {
		t.Fatal("after waiting Retry-After the key must pass again")
	}
}

func TestLocalMemoryIsBounded(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	l := NewLocal(1, 1, 64*16, c.now)
	for k := uint64(0); k < 100000; k++ {
		l.Allow(k)
	}
	if n := l.Len(); n > 64*16 {
		t.Fatalf("holds %d keys, bound is %d", n, 64*16)
	}
}

// TestLocalFullShardForgetsOnlyTheLeastRecentKey: a flood of new keys into
// a full shard evicts one key per new key, least recently seen first, so
// the keys being limited stay limited (a full shard used to forget every
// key at once).
func TestLocalFullShardForgetsOnlyTheLeastRecentKey(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	const perShard = 16
	l := NewLocal(0.001, 1, shards*perShard, c.now) // one event per 1000 s
	// Keys of one shard: the limited ones, then the flood.
	var same []uint64
	for k := uint64(1); len(same) < 2*perShard; k++ {
		if mix(k)%shards == 0 {
			same = append(same, k)
		}
	}
	limited, flood := same[:perShard], same[perShard:]
	for _, k := range limited {
		if ok, _ := l.Allow(k); !ok {
			t.Fatalf("key %d: first event refused", k)
		}
	}
	// The shard is full. Every limited key knocks again (refused: that
	// makes it recent), except the first, which went quiet.
	for _, k := range limited[1:] {
		if ok, _ := l.Allow(k); ok {
			t.Fatalf("key %d: second event allowed", k)
		}
	}
	// One new key arrives: only the quiet key is forgotten.
	if ok, _ := l.Allow(flood[0]); !ok {
		t.Fatal("a new key was refused")
	}
	for _, k := range limited[1:] {
		if ok, _ := l.Allow(k); ok {
			t.Fatalf("key %d was forgotten by one new key in its shard", k)
		}
	}
	if ok, _ := l.Allow(limited[0]); !ok {
		t.Fatal("the least recent key was not the one forgotten")
	}
	if n := l.Len(); n != perShard {
		t.Fatalf("holds %d keys, want the shard's bound %d", n, perShard)
	}
}

func TestLocalDisabled(t *testing.T) {
	l := NewLocal(0, 0, 10, nil)
	for i := 0; i < 1000; i++ {
		if ok, _ := l.Allow(1); !ok {
			t.Fatal("a disabled limiter refused")
		}
	}
}

func TestGateAdmitsKTimesRemaining(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	g := NewGate(2, 1, c.now)
	if ok, _ := g.Allow(1); !ok {
		t.Fatal("unknown remaining must not be gated")
	}
	g.Observe(1, 10) // 20/s
	admitted := 0
	for step := 0; step < 1000; step++ { // one second in 1ms steps, 5 tries each
		for i := 0; i < 5; i++ {
			if ok, _ := g.Allow(1); ok {
				admitted++
			}
		}
		c.add(time.Millisecond)
	}
	// burst (20) + 20/s over one second
	if admitted < 35 || admitted > 41 {
		t.Fatalf("admitted %d in 1s, want about 40 (burst 20 + 20/s)", admitted)
	}
}

func TestGateNeverStarvesTheLastUnit(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	g := NewGate(2, 5, c.now)
	g.Observe(1, 0) // even at 0 the floor keeps a trickle going (stock may come back)
	admitted := 0
	for step := 0; step < 2000; step++ {
		if ok, _ := g.Allow(1); ok {
			admitted++
		}
		c.add(time.Millisecond)
	}
	if admitted < 9 {
		t.Fatalf("admitted %d in 2s at the floor of 5/s", admitted)
	}
	ok, wait := g.Allow(1)
	if !ok && (wait <= 0 || wait > 200*time.Millisecond) {
		t.Fatalf("refusal must say when to retry: %v", wait)
	}
}

func TestGateForgetsRemainingWhenToldUnknown(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	g := NewGate(1, 1, c.now)
	g.Observe(1, 0)
	g.Allow(1) // the one token of the floor's burst
	if ok, _ := g.Allow(1); ok {
		t.Fatal("at remaining 0 the floor of 1/s must refuse a second request in the same instant")
	}
	g.Observe(1, -1) // "available": unknown until the engine answers again
	if ok, _ := g.Allow(1); !ok || g.Remaining(1) != -1 {
		t.Fatal("unknown remaining must not be gated")
	}
	g.Observe(2, -1) // unknown for a SKU never seen creates nothing
	if g.Remaining(2) != -1 {
		t.Fatal("remaining of an unseen sku")
	}
}

func TestGateShareUnderOnePerSecondStillAdmits(t *testing.T) {
	// One edge's share of a gate shared by 4: k 2/4, floor 1/4 per second.
	c := &clock{t: time.Unix(1000, 0)}
	g := NewGate(0.5, 0.25, c.now)
	g.Observe(1, 0)
	admitted := 0
	for step := 0; step < 9000; step++ { // 9 s in 1ms steps
		if ok, _ := g.Allow(1); ok {
			admitted++
		}
		c.add(time.Millisecond)
	}
	// the burst of one at 0 s, then one about every 4 s
	if admitted != 3 {
		t.Fatalf("admitted %d in 9 s at 0.25/s, want 3 (burst of one + 2)", admitted)
	}
	if ok, wait := g.Allow(1); ok || wait <= 0 || wait > 4*time.Second {
		t.Fatalf("refusal must say when to retry within 4 s: ok=%v wait=%v", ok, wait)
	}
}

func TestGateSetChangesTheRateAndKeepsTheStock(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	g := NewGate(0, 1, c.now) // off: everything passes, the stock is still learned
	g.Observe(1, 0)
	for range 10 {
		if ok, _ := g.Allow(1); !ok {
			t.Fatal("a gate that is off refused")
		}
	}
	g.Set(1, 1) // on: remaining 0, floor 1/s, burst one
	if ok, _ := g.Allow(1); !ok {
		t.Fatal("the first request after switching on must pass (burst of one)")
	}
	if ok, _ := g.Allow(1); ok {
		t.Fatal("the gate switched on live did not apply the stock it observed while off")
	}
	g.Set(0, 1)
	if ok, _ := g.Allow(1); !ok {
		t.Fatal("a gate switched off live still refused")
	}
}

func TestInflightBoundsAndReleases(t *testing.T) {
	f := NewInflight(2)
	first, second := f.Acquire(1), f.Acquire(1)
	if !first || !second {
		t.Fatalf("two places under a bound of 2: first %v, second %v", first, second)
	}
	if f.Acquire(1) {
		t.Fatal("a third attempt inside a bound of 2")
	}
	if !f.Acquire(2) {
		t.Fatal("another SKU has its own bound")
	}
	if n := f.InFlight(1); n != 2 {
		t.Fatalf("in flight %d after a refusal, want 2 (a refusal takes nothing)", n)
	}
	f.Release(1)
	if !f.Acquire(1) {
		t.Fatal("a released place must be free again")
	}
	// Lowered live: those inside stay and count; newcomers wait for room.
	f.SetLimit(1)
	f.Release(1)
	if f.Acquire(1) {
		t.Fatal("with 1 inside a bound of 1, a newcomer must be refused")
	}
	f.Release(1)
	if !f.Acquire(1) {
		t.Fatal("room again after the release")
	}
	// Off: no bound, but every attempt still counts, so switching the
	// bound on live sees those already inside.
	f.SetLimit(0)
	for range 100 {
		if !f.Acquire(1) {
			t.Fatal("a bound of 0 refused")
		}
	}
	f.SetLimit(50)
	if f.Acquire(1) {
		t.Fatal("101 inside, bound switched on at 50: a newcomer must be refused")
	}
	if n := f.InFlight(1); n != 101 {
		t.Fatalf("in flight %d, want 101", n)
	}
	f.Release(99) // a SKU never acquired: nothing to give back, nothing created
	if f.InFlight(99) != 0 {
		t.Fatal("release of an unseen sku changed something")
	}
}

func TestInflightConcurrentNeverExceedsTheBound(t *testing.T) {
	const bound = 8
	f := NewInflight(bound)
	var inside, peak atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2000 {
				if !f.Acquire(1) {
					continue
				}
				raise(&peak, inside.Add(1))
				inside.Add(-1)
				f.Release(1)
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > bound {
		t.Fatalf("%d inside at once, bound %d", p, bound)
	}
	if n := f.InFlight(1); n != 0 {
		t.Fatalf("%d left in flight after every release", n)
	}
}

func BenchmarkInflightRefuse(b *testing.B) {
	f := NewInflight(1)
	f.Acquire(1001)
	b.ReportAllocs()
	for b.Loop() {
		f.Acquire(1001)
	}
}

func BenchmarkInflightAcquireRelease(b *testing.B) {
	f := NewInflight(1 << 20)
	b.ReportAllocs()
	for b.Loop() {
		if f.Acquire(1001) {
			f.Release(1001)
		}
	}
}

func BenchmarkGateAllow(b *testing.B) {
	g := NewGate(10, 100, nil)
	g.Observe(1001, 1_000_000)
	b.ReportAllocs()
	for b.Loop() {
		g.Allow(1001)
	}
}

func BenchmarkLocalAllow(b *testing.B) {
	l := NewLocal(1e9, 1000, 1<<16, nil)
	ip := []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1}
	b.ReportAllocs()
	for b.Loop() {
		l.Allow(KeyString(ip))
	}
}

// Past the bound an attempt waits for a place: it gets the one a release
// frees, and is refused when none frees within the wait (or at once when
// the wait is 0).
func TestInflightWaitsForAPlace(t *testing.T) {
	f := NewInflight(1)
	if !f.Acquire(1) {
		t.Fatal("the first place")
	}
	if f.AcquireWait(1) {
		t.Fatal("wait 0: past the bound must be refused at once")
	}
	f.SetWait(50 * time.Millisecond)
	if f.AcquireWait(1) {
		t.Fatal("nothing released within the wait: must be refused")
	}
	f.SetWait(time.Minute)
	got := make(chan bool)
	go func() { got <- f.AcquireWait(1) }()
	select {
	case ok := <-got:
		t.Fatalf("got an answer (%v) with the only place still held", ok)
	case <-time.After(20 * time.Millisecond):
	}
	f.Release(1)
	if !<-got {
		t.Fatal("the waiter did not get the released place")
	}
	if n := f.InFlight(1); n != 1 {
		t.Fatalf("in flight %d, want 1 (the waiter's)", n)
	}
}

// Many waiters and many releases: with a wait far longer than the run
// nobody is refused, and the bound holds throughout.
func TestInflightWaitersAreAllServedWithinTheBound(t *testing.T) {
	const bound, workers, rounds = 4, 32, 200
	f := NewInflight(bound)
	f.SetWait(30 * time.Second)
	var inside, peak, refused atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if !f.AcquireWait(7) {
					refused.Add(1)
					continue
				}
				raise(&peak, inside.Add(1))
				runtime.Gosched()
				inside.Add(-1)
				f.Release(7)
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > bound {
		t.Fatalf("%d inside at once, bound %d", p, bound)
	}
	if r := refused.Load(); r != 0 {
		t.Fatalf("%d attempts refused with a 30 s wait: a wake-up was lost", r)
	}
	if n := f.InFlight(7); n != 0 {
		t.Fatalf("%d left in flight", n)
	}
}

// Places freed all at once reach as many waiters, none left parked until
// its wait runs out.
func TestInflightReleasesTogetherWakeEveryWaiter(t *testing.T) {
	const n = 3
	f := NewInflight(n)
	f.SetWait(2 * time.Second)
	for range n {
		f.Acquire(5)
	}
	got := make(chan bool, n)
	for range n {
		go func() { got <- f.AcquireWait(5) }()
	}
	time.Sleep(50 * time.Millisecond) // let them park (one that has not simply takes a free place)
	for range n {
		f.Release(5)
	}
	for range n {
		if !<-got {
			t.Fatal("a waiter was refused although a place had freed for it")
		}
	}
}

func BenchmarkInflightWaitRefuse(b *testing.B) {
	f := NewInflight(1)
	f.SetWait(time.Nanosecond)
	f.Acquire(1001)
	b.ReportAllocs()
	for b.Loop() {
		f.AcquireWait(1001)
	}
}

// raise sets peak to n if n is higher.
func raise(peak *atomic.Int64, n int64) {
	for {
		p := peak.Load()
		if n <= p || peak.CompareAndSwap(p, n) {
			return
		}
	}
}
