package ready

import (
	"slices"
	"sync"
)

// Status is what a starting process still waits for. Safe for concurrent
// use; a nil *Status ignores every call and waits for nothing.
type Status struct {
	mu      sync.Mutex
	waiting []string
}

// Set replaces the list of what the process waits for (e.g. "embedded
// servers" while `seckill dev` starts its own, before Wait names the
// dependencies).
func (s *Status) Set(names ...string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.waiting = slices.Clone(names)
	s.mu.Unlock()
}

// Waiting returns what the process still waits for, in the order given.
func (s *Status) Waiting() []string {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.waiting)
}

func (s *Status) done(name string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.waiting = slices.DeleteFunc(s.waiting, func(n string) bool { return n == name })
	s.mu.Unlock()
}
