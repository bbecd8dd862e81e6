package engine

import "time"

// progress is how far one partition has been drained and how fast: the
// drained counts of the last few seconds.
type progress struct {
	part      int32
	next      int64 // the next offset to drain; -1 before the first window
	every     time.Duration
	published time.Time
	// rates: attempts decided per 500 ms slot, the last 8 slots.
	slots [8]int
	slot  int64 // the slot number of slots[slot%8]
}

func newProgress(part int32, every time.Duration) *progress {
	return &progress{part: part, next: -1, every: every}
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

// done records n attempts decided up to next.
func (p *progress) done(next int64, n int, now time.Time) {
	p.roll(now)
	p.slots[p.slot%int64(len(p.slots))] += n
	p.next = next
}

// rate is attempts decided per second over the last slots.
func (p *progress) rate(now time.Time) float64 {
	p.roll(now)
	sum := 0
	for _, n := range p.slots {
		sum += n
	}
	return float64(sum) / (time.Duration(len(p.slots)) * slotLen).Seconds()
}

func (p *progress) due(now time.Time) bool { return now.Sub(p.published) >= p.every }
