package sale

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The pre-queue (Activity.Prequeue, DESIGN §13): the line of a queue-mode
// SKU opens before the sale; the attempts taken before Start are served in
// an order drawn at Start.

// MaxPrequeueMinutes bounds Activity.Prequeue: a day.
const MaxPrequeueMinutes = 24 * 60

// LineOpens is when the activity's queue-mode lines open: Start less the
// pre-queue.
func (a *Activity) LineOpens() time.Time {
	return a.Start.Add(-time.Duration(a.Prequeue) * time.Minute)
}

// Prequeued reports whether an attempt accepted at acceptedMs (unix ms)
// was taken in the activity's pre-queue: before Start, with a pre-queue.
func (a *Activity) Prequeued(acceptedMs int64) bool {
	return a.Prequeue > 0 && acceptedMs < a.Start.UnixMilli()
}

// PrequeueKey is the hash of the draw of (activity, sku)'s pre-queue:
// sk:{a<activity>:s<sku>}:pq, in the SKU's slot. Fields: "draw" (the
// Draw, written once: whoever drains later uses it) and "order" (the
// served order of the attempts' offsets, comma separated, for audit).
func PrequeueKey(activity, sku int64) string {
	var buf [48]byte
	return string(append(appendPrefix(buf[:0], activity, sku), 'p', 'q'))
}

// Draw is the record of a pre-queue's draw: the seed of the permutation
// (32 bytes from crypto/rand), the partition of the SKU's line and the
// offset before which the pre-queued attempts lie (the partition's high
// water mark at the draw). The order is a function of the seed and the
// pre-queued offsets (Permute), so a second drainer serves the same one.
type Draw struct {
	Seed      [32]byte
	Partition int32
	Cutoff    int64
}

// String is the record's form: "<seed hex>|<partition>|<cutoff>".
func (d Draw) String() string {
	return hex.EncodeToString(d.Seed[:]) + "|" + strconv.Itoa(int(d.Partition)) + "|" + strconv.FormatInt(d.Cutoff, 10)
}

// ParseDraw reads a Draw's String.
func ParseDraw(v string) (Draw, error) {
	var d Draw
	parts := strings.Split(v, "|")
	if len(parts) != 3 {
		return d, fmt.Errorf("pre-queue draw %q: want seed|partition|cutoff", v)
	}
	seed, err := hex.DecodeString(parts[0])
	if err != nil || len(seed) != len(d.Seed) {
		return d, fmt.Errorf("pre-queue draw %q: seed must be %d bytes of hex", v, len(d.Seed))
	}
	copy(d.Seed[:], seed)
	p, err1 := strconv.ParseInt(parts[1], 10, 32)
	c, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || p < 0 || c < 0 {
		return d, fmt.Errorf("pre-queue draw %q: partition and cutoff must be non-negative integers", v)
	}
	d.Partition, d.Cutoff = int32(p), c
	return d, nil
}

// Permute is the served order of the pre-queued attempts at offsets: the
// offsets sorted, then shuffled (Fisher–Yates) by a ChaCha8 stream keyed
// by the seed. The same seed and offsets give the same order, whatever
// order offsets come in. offsets is not changed.
func (d Draw) Permute(offsets []int64) []int64 {
	out := slices.Clone(offsets)
	slices.Sort(out)
	r := rand.New(rand.NewChaCha8(d.Seed))
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// AppendOrder appends the offsets comma separated (the "order" field of
// PrequeueKey).
func AppendOrder(dst []byte, order []int64) []byte {
	for i, o := range order {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, o, 10)
	}
	return dst
}
