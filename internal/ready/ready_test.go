package ready

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"seckill/internal/testenv"
)

// The waiting loop itself, with checks whose answers the test controls; the
// checks of real servers are tested against real servers (kafka_test.go,
// sql_test.go, shard's ready_test.go, and the processes in e2e/chaos).

// flaky fails until open is set.
type flaky struct {
	open  atomic.Bool
	calls atomic.Int64
}

func (f *flaky) check(context.Context) error {
	f.calls.Add(1)
	if f.open.Load() {
		return nil
	}
	return errors.New("LOADING Redis is loading the dataset in memory")
}

func logged(logs *observer.ObservedLogs, msg, dep string) int {
	n := 0
	for _, e := range logs.FilterMessage(msg).All() {
		if e.ContextMap()["dependency"] == dep {
			n++
		}
	}
	return n
}

func TestWaitLogsOneLinePerDependencyNotPerRetry(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	var slow flaky
	st := &Status{}
	w := Waiter{Timeout: 10 * time.Second, Log: zap.New(core), Status: st, LogEvery: 300 * time.Millisecond, MaxPause: 20 * time.Millisecond}
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- w.Wait(context.Background(),
			Dependency{Name: "redis.default", Check: slow.check},
			Dependency{Name: "database", Check: func(context.Context) error { return nil }})
	}()
	testenv.EventuallyOK(t, "only redis.default left waiting", 5*time.Second, func() error {
		if w := st.Waiting(); !slices.Equal(w, []string{"redis.default"}) {
			return fmt.Errorf("status %v", w)
		}
		return nil
	})
	time.Sleep(time.Second)
	slow.open.Store(true)
	if err := <-done; err != nil {
		t.Fatalf("Wait: %v", err)
	}
	took := time.Since(start)
	if got := st.Waiting(); len(got) != 0 {
		t.Errorf("status after the wait: %v", got)
	}
	calls := slow.calls.Load()
	first := logged(logs, "waiting for a dependency", "redis.default")
	still := logged(logs, "still waiting for a dependency", "redis.default")
	ready := logged(logs, "dependency ready", "redis.default")
	t.Logf("%d checks in %v: %d first line, %d still-waiting lines, %d ready line", calls, took, first, still, ready)
	if first != 1 || ready != 1 {
		t.Errorf("%d first lines and %d ready lines, want one each", first, ready)
	}
	// One line every LogEvery (300ms) over about a second, give or take one.
	if maxLines := int(took/(300*time.Millisecond)) + 1; still < 1 || still > maxLines {
		t.Errorf("%d still-waiting lines in %v, want 1..%d", still, took, maxLines)
	}
	if calls < 10*int64(first+still) {
		t.Errorf("%d checks for %d lines: the test did not retry often enough to tell lines from retries", calls, first+still)
	}
	for _, msg := range []string{"waiting for a dependency", "still waiting for a dependency", "dependency ready"} {
		if n := logged(logs, msg, "database"); n != 0 {
			t.Errorf("%d %q lines for a dependency ready at once", n, msg)
		}
	}
}

func TestWaitTimesOutNamingWhatNeverCame(t *testing.T) {
	var never flaky
	start := time.Now()
	err := Waiter{Timeout: 400 * time.Millisecond, MaxPause: 50 * time.Millisecond}.Wait(context.Background(),
		Dependency{Name: "kafka", Check: func(context.Context) error { return nil }},
		Dependency{Name: "redis.hot", Check: never.check})
	took := time.Since(start)
	var te *TimeoutError
	if !errors.Is(err, ErrStartTimeout) || !errors.As(err, &te) {
		t.Fatalf("Wait: %v, want a start timeout", err)
	}
	if !slices.Equal(te.Deps, []string{"redis.hot"}) {
		t.Errorf("late dependencies %v, want [redis.hot]", te.Deps)
	}
	msg := err.Error()
	for _, want := range []string{"redis.hot", "LOADING", "start_timeout", "SECKILL_START_TIMEOUT"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not name %q", msg, want)
		}
	}
	if strings.Contains(msg, "kafka") {
		t.Errorf("error %q names the dependency that was ready", msg)
	}
	if took < 400*time.Millisecond || took > 2*time.Second {
		t.Errorf("gave up after %v, want about the 400ms timeout", took)
	}
}

func TestWaitKeepsTheReasonBeforeTheDeadline(t *testing.T) {
	// A check that blocks until its context ends: the timeout must report
	// why it was not ready before, not "context deadline exceeded".
	var n atomic.Int64
	err := Waiter{Timeout: 300 * time.Millisecond, MaxPause: 10 * time.Millisecond}.Wait(context.Background(),
		Dependency{Name: "database", Check: func(ctx context.Context) error {
			if n.Add(1) == 1 {
				return errors.New("connection refused")
			}
			<-ctx.Done()
			return ctx.Err()
		}})
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Wait: %v, want the last real reason", err)
	}
}

func TestWaitInterrupted(t *testing.T) {
	var never flaky
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	err := Waiter{Timeout: time.Minute}.Wait(ctx, Dependency{Name: "kafka", Check: never.check})
	if !errors.Is(err, ErrInterrupted) || errors.Is(err, ErrStartTimeout) || !strings.Contains(err.Error(), "kafka") {
		t.Fatalf("Wait: %v, want interrupted while waiting for kafka", err)
	}
}

func TestWaitWithoutTimeoutRefused(t *testing.T) {
	if err := (Waiter{}).Wait(context.Background()); err == nil {
		t.Fatal("a Waiter without a timeout waited")
	}
}
