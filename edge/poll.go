package edge

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// poll runs step (bounded by RedisTimeout) every interval and whenever
// kick fires (nil: never), until ctx ends; first says whether it runs once
// at the start too. A failure is logged once per outage, as failed, and its
// end once, as recovered: the part keeps serving from its last good state
// meanwhile.
func (s *Server) poll(ctx context.Context, every time.Duration, kick <-chan struct{}, first bool, failed, recovered string,
	step func(context.Context) error) {
	defer s.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	failing := false
	for {
		if first {
			sctx, cancel := context.WithTimeout(ctx, s.cfg.RedisTimeout)
			err := step(sctx)
			cancel()
			switch {
			case err == nil:
				if failing {
					s.log.Info(recovered)
				}
				failing = false
			case ctx.Err() != nil:
				return
			case !failing:
				s.log.Warn(failed, zap.Error(err))
				failing = true
			}
		}
		first = true
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-kick:
		}
	}
}
