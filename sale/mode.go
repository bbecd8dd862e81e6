package sale

import "fmt"

// Modes of a SKU (SKU.Mode): how the edges take its purchase attempts.
const (
	// ModeDirect (also the empty string) occupies stock on the buyer's
	// request: the answer is QUEUING or a refusal.
	ModeDirect = "direct"
	// ModeQueue appends the attempt to the SKU's waiting line (the
	// attempts topic) and answers 202 WAITING at once; the engine's
	// drainer occupies in line order at the pace the shard sustains, or
	// the SKU's Rate.
	ModeQueue = "queue"
)

// MaxQueueRate bounds SKU.Rate: attempts drained per second.
const MaxQueueRate = 1_000_000

// Queued reports whether k's attempts go through the waiting line.
func (k *SKU) Queued() bool { return k.Mode == ModeQueue }

// ValidateMode reports a mode or rate out of range.
func (k *SKU) ValidateMode() error {
	switch k.Mode {
	case "", ModeDirect, ModeQueue:
	default:
		return fmt.Errorf("mode must be direct or queue")
	}
	if k.Rate < 0 || k.Rate > MaxQueueRate {
		return fmt.Errorf("rate must be 0..%d", MaxQueueRate)
	}
	if k.Mode == ModeQueue && k.Buckets > 1 {
		// The waiting line keeps one waiting record and one result hash
		// per SKU; a bucketed SKU's tickets live in their buckets.
		return fmt.Errorf("queue mode serves a SKU of one ledger; this one has %d buckets", k.Buckets)
	}
	return nil
}
