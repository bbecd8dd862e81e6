package sale

import (
	"strconv"
	"sync/atomic"
	"time"
)

// RequestNos hands out ticket numbers "<activity>-<sku>-<id>": the SKU the
// ticket is for, so a ticket number alone tells which shard holds its
// result (ResultsKey), then id, a positive decimal of at most 19 digits (18
// until mid-2031), ms<<22 | node<<12 | seq with ms the milliseconds since
// 2024-01-01 UTC, node the node id (0-1023) and seq a per-millisecond
// sequence (README, "Numbers"): unique across nodes with distinct ids and,
// within a SKU, sortable by time. It is safe for concurrent use and takes
// no lock.
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

// MaxRequestNoLen is the longest ticket number: two ids of up to 19 digits,
// a bucket (a dot and up to two digits), the 19-digit id and two dashes.
const MaxRequestNoLen = 3*19 + 3 + 2

// Next returns the next ticket number of (activity, sku).
func (g *RequestNos) Next(activity, sku int64) string {
	var buf [MaxRequestNoLen]byte
	return string(g.Append(buf[:0], activity, sku))
}

// Append appends the next ticket number of (activity, sku) to dst.
func (g *RequestNos) Append(dst []byte, activity, sku int64) []byte {
	return g.AppendIn(dst, activity, sku, NoBucket)
}

// NextIn returns the next ticket number of bucket b of (activity, sku):
// "<activity>-<sku>.<b>-<id>", so the ticket alone names the sub-ledger
// that holds it (NoBucket: Next's form).
func (g *RequestNos) NextIn(activity, sku int64, b int) string {
	var buf [MaxRequestNoLen]byte
	return string(g.AppendIn(buf[:0], activity, sku, b))
}

// AppendIn appends NextIn's ticket number to dst.
func (g *RequestNos) AppendIn(dst []byte, activity, sku int64, b int) []byte {
	dst = strconv.AppendInt(dst, activity, 10)
	dst = append(dst, '-')
	dst = strconv.AppendInt(dst, sku, 10)
	if b >= 0 {
		dst = append(dst, '.')
		dst = strconv.AppendInt(dst, int64(b), 10)
	}
	dst = append(dst, '-')
	return strconv.AppendInt(dst, g.nextID(), 10)
}

// nextID is the id part: ms<<22 | node<<12 | seq.
func (g *RequestNos) nextID() int64 {
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
			return (next>>seqBits)<<22 | g.node<<seqBits | next&(1<<seqBits-1)
		}
	}
}

// ParseRequestNo reads a ticket number RequestNos made back into its
// activity, SKU and id part. Each of the three must be a positive decimal
// in its canonical form (no sign, no leading zero, at most 19 digits, within
// int64), so one ticket has one spelling; anything else is not ok. It does
// not allocate.
func ParseRequestNo(rn string) (activity, sku int64, id string, ok bool) {
	activity, sku, _, id, ok = ParseTicket(rn)
	return activity, sku, id, ok
}

// ParseTicket is ParseRequestNo that also reads the bucket the number
// names: NoBucket for "<activity>-<sku>-<id>", b for
// "<activity>-<sku>.<b>-<id>" (b a canonical decimal below MaxBuckets).
func ParseTicket(rn string) (activity, sku int64, bucket int, id string, ok bool) {
	if len(rn) > MaxRequestNoLen {
		return 0, 0, 0, "", false
	}
	i := indexDash(rn)
	if i < 0 {
		return 0, 0, 0, "", false
	}
	j := indexDash(rn[i+1:])
	if j < 0 {
		return 0, 0, 0, "", false
	}
	j += i + 1
	id = rn[j+1:]
	if activity, ok = positive(rn[:i]); !ok {
		return 0, 0, 0, "", false
	}
	skuPart, bucket := rn[i+1:j], NoBucket
	if d := indexDot(skuPart); d >= 0 {
		n, ok := positive(skuPart[d+1:])
		if skuPart[d+1:] == "0" {
			n, ok = 0, true
		}
		if !ok || n >= MaxBuckets {
			return 0, 0, 0, "", false
		}
		skuPart, bucket = skuPart[:d], int(n)
	}
	if sku, ok = positive(skuPart); !ok {
		return 0, 0, 0, "", false
	}
	if _, ok = positive(id); !ok {
		return 0, 0, 0, "", false
	}
	return activity, sku, bucket, id, true
}

func indexDot(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return i
		}
	}
	return -1
}

func indexDash(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '-' {
			return i
		}
	}
	return -1
}

// positive reads a canonical positive decimal that fits int64.
func positive(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 19 || s[0] == '0' {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if n > 1<<63-1 {
		return 0, false
	}
	return int64(n), true
}

// RequestNoTime returns the millisecond at which the ticket number rn was
// handed out (the leading timestamp bits of its id part), or false when rn
// is not a number RequestNos made. A bare id — the form ticket numbers had
// before they named their SKU — is read too, so tickets of a sale that ran
// across the upgrade still age. The orphan sweeper and the reconciler use
// it to age occupancies without a lookup.
func RequestNoTime(rn string) (time.Time, bool) {
	id := rn
	if _, _, part, ok := ParseRequestNo(rn); ok {
		id = part
	}
	n, ok := positive(id)
	if !ok {
		return time.Time{}, false
	}
	return time.UnixMilli(n>>22 + epoch), true
}
