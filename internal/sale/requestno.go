package sale

import (
	"strconv"
	"sync/atomic"
	"time"
)

// RequestNos hands out ticket numbers: positive decimals of at most 19
// digits (18 until mid-2031), ms<<22 | node<<12 | seq with ms the
// milliseconds since 2024-01-01 UTC, node the node id (0-1023) and seq a
// per-millisecond sequence (README, "Numbers"): unique across nodes with
// distinct ids and sortable by time. It is safe for
// concurrent use and takes no lock.
type RequestNos struct {
	node  int64
	state atomic.Int64 // ms<<12 | seq
	now   func() time.Time
}

const seqBits = 12

// NewRequestNos returns a generator for node (taken mod 1024).
func NewRequestNos(node int64) *RequestNos {
	return &RequestNos{node: node & 1023, now: time.Now}
}

// epoch shortens the timestamp: 2024-01-01 UTC.
const epoch = 1704067200000

// Next returns the next ticket number.
func (g *RequestNos) Next() string {
	var buf [20]byte
	return string(g.Append(buf[:0]))
}

// Append appends the next ticket number to dst.
func (g *RequestNos) Append(dst []byte) []byte {
	for {
		old := g.state.Load()
		ms := g.now().UnixMilli() - epoch
		oldMs := old >> seqBits
		var next int64
		if ms > oldMs {
			next = ms << seqBits
		} else {
			// Same millisecond or clock went back: keep counting on the
			// last timestamp so numbers never repeat.
			next = old + 1
		}
		if g.state.CompareAndSwap(old, next) {
			id := (next>>seqBits)<<22 | g.node<<seqBits | next&(1<<seqBits-1)
			return strconv.AppendInt(dst, id, 10)
		}
	}
}

// RequestNoTime returns the millisecond at which the ticket number rn was
// handed out (its leading timestamp bits), or false when rn is not a number
// RequestNos made. The orphan sweeper and the reconciler use it to age
// occupancies without a lookup.
func RequestNoTime(rn string) (time.Time, bool) {
	id, err := strconv.ParseInt(rn, 10, 64)
	if err != nil || id <= 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(id>>22 + epoch), true
}
