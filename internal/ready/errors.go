package ready

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

var (
	// ErrStartTimeout: the start timeout passed before every dependency
	// was ready. The *TimeoutError that wraps it names them.
	ErrStartTimeout = errors.New("start timeout")
	// ErrInterrupted: the wait was cancelled (SIGINT or SIGTERM while
	// starting); the process should stop without an error of its own.
	ErrInterrupted = errors.New("start interrupted")
)

// TimeoutError is the end of a wait that lasted the whole start timeout.
type TimeoutError struct {
	Timeout time.Duration
	Deps    []string // the dependencies not ready, in the order given
	Causes  []error  // the last reason of each
}

func (e *TimeoutError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "start_timeout (%v) passed while waiting for ", e.Timeout)
	for i, d := range e.Deps {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (%v)", d, e.Causes[i])
	}
	b.WriteString("; raise start_timeout (SECKILL_START_TIMEOUT) to wait longer")
	return b.String()
}

// Unwrap makes errors.Is(err, ErrStartTimeout) true.
func (e *TimeoutError) Unwrap() error { return ErrStartTimeout }
