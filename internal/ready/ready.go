// Package ready makes a starting process wait for its servers instead of
// dying on them: a Redis still loading its dataset (LOADING), a broker that
// does not answer metadata yet or lacks a topic, a database that refuses
// connections. Waiter.Wait checks every Dependency until each answers, logs
// one line per dependency when its wait begins and one every few seconds
// while it lasts, and gives up after a bounded start timeout with an error
// naming what never came. While it waits, Serve answers the process's HTTP
// listeners: /healthz alive, /readyz not ready, everything else 503 BUSY.
//
// It is a leaf: the checks of the project's own servers are built where
// their clients are configured (shard.Dependencies for Redis) or from
// plain settings (Kafka, SQL).
package ready

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Dependency is one server a process needs before it builds its parts.
type Dependency struct {
	// Name is what logs, /readyz and the timeout error call it:
	// "redis.default", "redis.hot", "kafka", "database".
	Name string
	// Check returns nil once the server answers as the process will use
	// it, and the reason otherwise. It must return within ctx (give or
	// take its client's own dial and read timeouts).
	Check func(ctx context.Context) error
}

// Defaults of Waiter.
const (
	// DefaultLogEvery spaces the "still waiting" lines of one dependency.
	DefaultLogEvery = 5 * time.Second
	// DefaultMaxPause is the longest pause between two checks of one
	// dependency; the first pause is firstPause, doubling up to it.
	DefaultMaxPause = time.Second
	firstPause      = 50 * time.Millisecond
	// attemptTimeout bounds one check.
	attemptTimeout = 5 * time.Second
)

// Waiter waits for dependencies. The zero value is not usable: Timeout must
// be positive.
type Waiter struct {
	// Timeout bounds the whole wait (start_timeout).
	Timeout time.Duration
	// Log gets, per dependency that is not ready at the first check, one
	// line when the wait begins, one every LogEvery while it lasts and one
	// when it ends. A dependency ready at once logs nothing. Nil: no logs.
	Log *zap.Logger
	// Status, if not nil, lists the dependencies still awaited (what the
	// start-up probe's /readyz names).
	Status *Status
	// LogEvery defaults to DefaultLogEvery.
	LogEvery time.Duration
	// MaxPause defaults to DefaultMaxPause.
	MaxPause time.Duration
}

// Wait checks every dependency, concurrently, until each is ready. It
// returns nil when all are; a *TimeoutError (errors.Is ErrStartTimeout)
// naming the ones still not ready, with their last reasons, when Timeout
// passes first; an error wrapping ErrInterrupted when ctx ends first (the
// process was told to stop).
func (w Waiter) Wait(ctx context.Context, deps ...Dependency) error {
	if w.Timeout <= 0 {
		return errors.New("ready: start timeout must be positive")
	}
	if w.Log == nil {
		w.Log = zap.NewNop()
	}
	if w.LogEvery <= 0 {
		w.LogEvery = DefaultLogEvery
	}
	if w.MaxPause <= 0 {
		w.MaxPause = DefaultMaxPause
	}
	names := make([]string, len(deps))
	for i, d := range deps {
		names[i] = d.Name
	}
	w.Status.Set(names...)
	wctx, cancel := context.WithTimeout(ctx, w.Timeout)
	defer cancel()
	start := time.Now()
	causes := make([]error, len(deps))
	var wg sync.WaitGroup
	for i := range deps {
		wg.Go(func() { causes[i] = w.await(wctx, deps[i], start) })
	}
	wg.Wait()
	var late []string
	var why []error
	for i, err := range causes {
		if err != nil {
			late = append(late, deps[i].Name)
			why = append(why, err)
		}
	}
	if len(late) == 0 {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w while waiting for %s", ErrInterrupted, strings.Join(late, ", "))
	}
	return &TimeoutError{Timeout: w.Timeout, Deps: late, Causes: why}
}

// await checks d until it is ready (nil) or ctx ends (the last reason).
func (w Waiter) await(ctx context.Context, d Dependency, start time.Time) error {
	pause := firstPause
	var last error
	var lastLog time.Time
	for {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		err := d.Check(actx)
		cancel()
		if err == nil {
			w.Status.done(d.Name)
			if last != nil {
				w.Log.Info("dependency ready", zap.String("dependency", d.Name),
					zap.Duration("waited", time.Since(start).Round(time.Millisecond)))
			}
			return nil
		}
		if ctx.Err() != nil {
			// The check was cut short by the deadline: the reason before
			// it says more than "context deadline exceeded".
			if last != nil {
				return last
			}
			return err
		}
		now := time.Now()
		switch {
		case last == nil:
			lastLog = now
			w.Log.Info("waiting for a dependency", zap.String("dependency", d.Name), zap.Error(err),
				zap.Duration("startTimeout", w.Timeout))
		case now.Sub(lastLog) >= w.LogEvery:
			lastLog = now
			w.Log.Info("still waiting for a dependency", zap.String("dependency", d.Name), zap.Error(err),
				zap.Duration("waited", now.Sub(start).Round(time.Second)), zap.Duration("startTimeout", w.Timeout))
		}
		last = err
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return last
		case <-t.C:
		}
		pause = min(2*pause, w.MaxPause)
	}
}
