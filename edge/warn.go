package edge

import (
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// rareWarner logs a warning at most once a second, whatever its message:
// a failure on the request path must never become a log line per request.
// Safe for concurrent use.
type rareWarner struct {
	log  *zap.Logger
	last atomic.Int64 // unix nanos of the last warning
}

func (w *rareWarner) warn(msg string, err error) {
	now := time.Now().UnixNano()
	last := w.last.Load()
	if now-last < int64(time.Second) || !w.last.CompareAndSwap(last, now) {
		return
	}
	w.log.Warn(msg, zap.Error(err))
}
