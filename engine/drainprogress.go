package engine

import (
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// progress is how far one partition has been drained and how fast: the
// attempts decided per 500 ms slot over the last 4 s. Safe for concurrent
// use (the claim's loop writes it, its reporter reads it).
type progress struct {
	part int32

	mu    sync.Mutex
	next  int64 // the next offset to drain; -1 while unknown
	slots [8]int
	slot  int64 // the slot number of slots[slot%8]
}

// newProgress starts at the claim's initial offset (a committed one, or
// unknown: -1 until the first window).
func newProgress(part int32, initial int64) *progress {
	p := &progress{part: part, next: -1}
	if initial >= 0 && initial != sarama.OffsetNewest && initial != sarama.OffsetOldest {
		p.next = initial
	}
	return p
}

const slotLen = 500 * time.Millisecond

func (p *progress) roll(now time.Time) {
	s := now.UnixNano() / int64(slotLen)
	if s-p.slot >= int64(len(p.slots)) {
		p.slots = [8]int{}
	} else {
		for i := p.slot + 1; i <= s; i++ {
			p.slots[i%int64(len(p.slots))] = 0
		}
	}
	if s > p.slot {
		p.slot = s
	}
}

// done records n attempts decided, the next offset to drain being next.
func (p *progress) done(next int64, n int, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.roll(now)
	p.slots[p.slot%int64(len(p.slots))] += n
	p.next = next
}

// read is the next offset to drain and the attempts decided per second
// over the last 4 s.
func (p *progress) read(now time.Time) (int64, float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.roll(now)
	sum := 0
	for _, n := range p.slots {
		sum += n
	}
	return p.next, float64(sum) / (time.Duration(len(p.slots)) * slotLen).Seconds()
}
