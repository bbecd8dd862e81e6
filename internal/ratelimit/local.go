// Package ratelimit holds the edge's rate limits, cheapest first:
//
//   - Local: per-key (client IP, user) limits in process memory, GCRA with a
//     burst, sharded so that no lock is global, bounded in memory;
//   - Gate: the per-SKU admission gate, which lets at most K × remaining
//     stock per second through to the engine;
//   - Inflight: a bound on the attempts per SKU in flight at once.
//
// Gate and Inflight take new settings in place while in use; Local is
// rebuilt to change. The per user × SKU window is not here: the engine's
// occupy script counts it in Redis (package stock).
//
// Each answers with how long the caller should wait (Retry-After).
package ratelimit

import (
	"sync"
	"time"
)

const shards = 64

// Local limits each key to Rate events per second with a burst of Burst,
// using GCRA (one int64 per key: the theoretical arrival time). Memory is
// bounded: each of 64 shards is an LRU of at most MaxKeys/64 keys, and a new
// key in a full shard forgets the one key seen least recently — never the
// whole shard, so a flood of new keys cannot reset a key that is being
// limited while it keeps knocking (each attempt, allowed or not, makes it
// recent). Forgetting errs toward letting traffic through, never toward
// blocking a key that did nothing. The shards' memory (32 bytes a key) is
// taken when the limiter is made, so it does not grow with the crowd and
// a new key allocates nothing. Safe for concurrent use.
type Local struct {
	interval int64 // nanoseconds between events
	tau      int64 // burst tolerance
	perShard int
	now      func() time.Time
	shards   [shards]localShard
}

type localShard struct {
	mu  sync.Mutex
	tat *lru
	_   [48]byte // keep shards on separate cache lines
}

// NewLocal returns a limiter of rate events/s with burst; maxKeys bounds
// memory. rate <= 0 disables it (Allow always true).
func NewLocal(rate float64, burst int, maxKeys int, now func() time.Time) *Local {
	if now == nil {
		now = time.Now
	}
	l := &Local{now: now, perShard: max(maxKeys/shards, 16)}
	if rate <= 0 {
		return l // disabled: no memory for keys
	}
	l.interval = int64(float64(time.Second) / rate)
	l.tau = l.interval * int64(max(burst, 1)-1)
	for i := range l.shards {
		l.shards[i].tat = newLRU(l.perShard)
	}
	return l
}

// Allow records one event for key and reports whether it is within the
// limit; if not, wait says how long until it would be.
func (l *Local) Allow(key uint64) (ok bool, wait time.Duration) {
	if l == nil || l.interval == 0 {
		return true, 0
	}
	now := l.now().UnixNano()
	s := &l.shards[mix(key)%shards]
	s.mu.Lock()
	// Get makes the key the most recent, refused or not.
	tat, seen := s.tat.Get(key)
	if !seen || tat < now {
		tat = now
	}
	if tat-now > l.tau {
		s.mu.Unlock()
		return false, time.Duration(tat - now - l.tau)
	}
	s.tat.Add(key, tat+l.interval) // a new key in a full shard evicts the least recent
	s.mu.Unlock()
	return true, 0
}

// Len is the number of keys held (for tests and metrics).
func (l *Local) Len() int {
	if l == nil || l.interval == 0 {
		return 0
	}
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		n += s.tat.Len()
		s.mu.Unlock()
	}
	return n
}

// Cap is the most keys it holds (MaxKeys rounded to whole shards; 0 when
// disabled).
func (l *Local) Cap() int {
	if l == nil || l.interval == 0 {
		return 0
	}
	return l.perShard * shards
}

// mix spreads sequential keys (user ids) over shards.
func mix(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	return k
}

// KeyString hashes a string key (an IP) with FNV-1a, without allocating.
func KeyString(s []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range s {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}
