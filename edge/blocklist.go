package edge

import (
	"context"
	"time"

	"go.uber.org/zap"

	"seckill/internal/blocklist"
)

// The blocklist in force is the union of edge.blocklist (configuration)
// and the admin API's entries in Redis, held as an immutable set behind an
// atomic pointer: a lookup takes no lock. It is re-read from Redis when a
// blocklist event arrives, after every re-subscription (events may have
// been missed) and every edge.blocklist.refresh_interval. A failed read
// keeps the last set: an outage of Redis neither lifts nor adds a block.

// blocked returns the blocklist in force. No allocation.
func (s *Server) blocked() *blocklist.Set { return s.block.Load() }

// loadBlocklist reads the admin API's entries once and installs the union
// with the configured ones.
func (s *Server) loadBlocklist(ctx context.Context) error {
	dyn, bad, err := s.blockStore.Load(ctx)
	if err != nil {
		return err
	}
	if len(bad) > 0 {
		s.warnRare("edge skips unreadable blocklist entries in Redis", errBadEntries(bad))
	}
	set := s.staticBlock.Union(dyn)
	s.block.Store(set)
	s.m.blockIPs.Set(float64(len(set.IPs())))
	s.m.blockUsers.Set(float64(len(set.Users())))
	return nil
}

// reloadBlocklist asks the loader for a read now; requests coalesce.
func (s *Server) reloadBlocklist() {
	select {
	case s.blockCh <- struct{}{}:
	default:
	}
}

// refreshBlocklist re-reads the blocklist every refresh interval and when
// asked.
func (s *Server) refreshBlocklist(ctx context.Context) {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.Blocklist.RefreshInterval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.blockCh:
		}
		lctx, cancel := context.WithTimeout(ctx, s.cfg.RedisTimeout)
		err := s.loadBlocklist(lctx)
		cancel()
		switch {
		case err == nil:
			if failing {
				s.log.Info("edge blocklist load recovered")
			}
			failing = false
		case ctx.Err() != nil:
			return
		case !failing:
			s.log.Warn("edge blocklist load failed; keeping the last one", zap.Error(err))
			failing = true
		}
	}
}

type errBadEntries []string

func (e errBadEntries) Error() string {
	msg := "bad blocklist entries:"
	for _, b := range e {
		msg += " " + b
	}
	return msg
}
