package ratelimit

import (
	"sync"
	"sync/atomic"
)

// skuMap holds one state per SKU for the per-SKU layers (Gate, Inflight).
// Finding a SKU takes no lock and allocates nothing: the map is immutable
// and replaced, under mu, on the rare insert (SKUs are few and created once
// each; the edge asks only for SKUs its catalog sells).
type skuMap[T any] struct {
	mu sync.Mutex // serialises inserts
	m  atomic.Pointer[map[int64]*T]
}

// lookup returns the SKU's state, or nil when it has none yet.
func (s *skuMap[T]) lookup(id int64) *T {
	if m := s.m.Load(); m != nil {
		return (*m)[id]
	}
	return nil
}

// get returns the SKU's state, creating it with init (copy on write).
func (s *skuMap[T]) get(id int64, init func(*T)) *T {
	if v := s.lookup(id); v != nil {
		return v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.m.Load()
	if old != nil {
		if v := (*old)[id]; v != nil {
			return v
		}
	}
	next := make(map[int64]*T, 1)
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	v := new(T)
	if init != nil {
		init(v)
	}
	next[id] = v
	s.m.Store(&next)
	return v
}

// len is the number of SKUs with a state.
func (s *skuMap[T]) len() int {
	if m := s.m.Load(); m != nil {
		return len(*m)
	}
	return 0
}
