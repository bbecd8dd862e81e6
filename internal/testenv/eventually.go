package testenv

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// Eventually polls cond until it returns true and fails the test if it does
// not within timeout, naming what it waited for. The first check is at once;
// the pause between checks grows from 5ms to 50ms, so a quick condition is
// seen quickly and a slow one does not spin.
func Eventually(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	if err := poll(timeout, nil, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}); err != nil {
		t.Fatalf("waited %v for %s: it did not happen", timeout, what)
	}
}

// EventuallyOK is Eventually for a check that says why it does not hold
// yet: it polls check until it returns nil, and the failure quotes the last
// error check returned.
func EventuallyOK(t testing.TB, what string, timeout time.Duration, check func() error) {
	t.Helper()
	if err := poll(timeout, nil, check); err != nil {
		t.Fatalf("waited %v for %s: %v", timeout, what, err)
	}
}

var errNotYet = errors.New("not yet")

// errGaveUp is what poll answers when stop closes first.
var errGaveUp = errors.New("gave up")

// poll runs check until it returns nil (poll returns nil), timeout passes
// (poll returns check's last error) or stop closes (poll returns errGaveUp
// wrapping check's last error). A nil stop never closes.
func poll(timeout time.Duration, stop <-chan struct{}, check func() error) error {
	deadline := time.Now().Add(timeout)
	pause := 5 * time.Millisecond
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-stop:
			return fmt.Errorf("%w: %w", errGaveUp, err)
		default:
		}
		if !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(min(pause, time.Until(deadline)))
		pause = min(2*pause, 50*time.Millisecond)
	}
}
