package edge

import (
	"context"

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

type errBadEntries []string

func (e errBadEntries) Error() string {
	msg := "bad blocklist entries:"
	for _, b := range e {
		msg += " " + b
	}
	return msg
}
