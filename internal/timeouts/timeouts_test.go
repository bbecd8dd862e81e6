package timeouts

import (
	"sync"
	"testing"
	"time"
)

// TestAfterClosesBetweenDAndDPlusTick: every channel closes no sooner than
// D after its caller asked and not much later than D + Tick (a busy
// machine may add scheduling delay; the bound allows 50 ms of it).
func TestAfterClosesBetweenDAndDPlusTick(t *testing.T) {
	s := New(64 * time.Millisecond)
	if s.Tick() != time.Millisecond {
		t.Fatalf("tick %v, want 1ms (64ms / %d)", s.Tick(), TickDivisor)
	}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			time.Sleep(time.Duration(i%7) * time.Millisecond)
			start := time.Now()
			<-s.After()
			if took := time.Since(start); took < s.D() || took > s.D()+s.Tick()+50*time.Millisecond {
				t.Errorf("closed after %v, want %v to %v", took, s.D(), s.D()+s.Tick())
			}
		})
	}
	wg.Wait()
}

// TestCallersOfOneTickShareAChannel: calls within one tick get one channel
// (one timer); a call a tick later gets a new one, and the old one still
// closes.
func TestCallersOfOneTickShareAChannel(t *testing.T) {
	s := New(6400 * time.Millisecond) // tick 100 ms
	a, b := s.After(), s.After()
	if a != b {
		t.Fatal("two calls within a tick got two channels")
	}
	time.Sleep(s.Tick() + 10*time.Millisecond)
	c := s.After()
	if c == a {
		t.Fatal("a call a tick later got the earlier tick's channel")
	}
	select {
	case <-a:
		t.Fatal("closed long before its timeout")
	default:
	}
	short := New(10 * time.Millisecond)
	ch := short.After()
	select {
	case <-ch:
	case <-time.After(2 * time.Second):
		t.Fatal("a 10ms timeout did not close within 2s")
	}
}

// TestTickIsAtLeastAMillisecond: very short timeouts do not tick faster.
func TestTickIsAtLeastAMillisecond(t *testing.T) {
	if s := New(time.Microsecond); s.Tick() != time.Millisecond {
		t.Fatalf("tick %v", s.Tick())
	}
	if s := New(3 * time.Second); s.Tick() != 3*time.Second/TickDivisor {
		t.Fatalf("tick %v", s.Tick())
	}
}

// BenchmarkSharedAfter and BenchmarkTimerPerCall are what a call pays for
// its timeout: a shared channel, or a timer of its own (what
// context.WithTimeout and time.NewTimer start).
func BenchmarkSharedAfter(b *testing.B) {
	s := New(3 * time.Second)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			select {
			case <-s.After():
				b.Error("closed at once")
			default:
			}
		}
	})
}

func BenchmarkTimerPerCall(b *testing.B) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			t := time.NewTimer(3 * time.Second)
			select {
			case <-t.C:
				b.Error("fired at once")
			default:
			}
			t.Stop()
		}
	})
}
