package edge

import (
	"errors"
	"time"
)

// StreamConfig is edge.result_stream: the shape of the result streams that
// package web serves (web.ResultEvents).
type StreamConfig struct {
	// MaxPerUser bounds the streams one user holds open on this process;
	// past it the stream route answers 429. Default 4.
	MaxPerUser int `yaml:"max_per_user"`
	// Heartbeat is how often an idle stream sends a comment line
	// (": ping"): proxies keep it open, and a client that went away is
	// noticed by the failed write. Default 10s.
	Heartbeat time.Duration `yaml:"heartbeat"`
	// WriteTimeout bounds each event's (and heartbeat's) write. The
	// stream replaces edge.write_timeout, which would otherwise cut it
	// that long after it started. Default 5s.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// MaxWait ends a stream that stays QUEUING. Default 30s; the page
	// falls back to polling after it.
	MaxWait time.Duration `yaml:"max_wait"`
	// Recheck is how often a stream reads its result although nothing was
	// pushed: a safety net for a notification lost while the subscription
	// reconnected (it is woken after a re-subscription as well). Default 5s
	// (100ms without a hub).
	Recheck time.Duration `yaml:"recheck"`
}

// DefaultStreamConfig returns the defaults named on each field.
func DefaultStreamConfig() StreamConfig {
	return StreamConfig{MaxPerUser: 4, Heartbeat: 10 * time.Second, WriteTimeout: 5 * time.Second,
		MaxWait: 30 * time.Second, Recheck: 5 * time.Second}
}

// Validate names the first bad key.
func (c *StreamConfig) Validate() error {
	switch {
	case c.MaxPerUser < 1:
		return errors.New("edge.result_stream.max_per_user must be at least 1")
	case c.Heartbeat <= 0 || c.WriteTimeout <= 0 || c.MaxWait <= 0 || c.Recheck <= 0:
		return errors.New("edge.result_stream.heartbeat, write_timeout, max_wait and recheck must be positive")
	}
	return nil
}
