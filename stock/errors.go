package stock

import (
	"errors"
	"fmt"
)

// Outcomes of an occupy other than success (see outcome.go for the table
// that maps each to its script code, metric label and sidecar wire code).
// The edge maps each to one HTTP status in one place.
var (
	// ErrNotOpen: the activity is offline or not started (judged by Redis
	// server time).
	ErrNotOpen = errors.New("activity not open")
	// ErrEnded: the activity's window has closed.
	ErrEnded = errors.New("activity ended")
	// ErrSoldOut: remaining stock is below the quantity asked.
	ErrSoldOut = errors.New("sold out")
	// ErrDuplicate: the user already holds a ticket for this SKU; the
	// returned Ticket names it.
	ErrDuplicate = errors.New("duplicate purchase")
	// ErrOverLimit: quantity above the per-user limit.
	ErrOverLimit = errors.New("over per-user limit")
	// ErrRateLimited: the buyer's attempts on the SKU are over the user ×
	// SKU window (edge.rate.user_sku_limit per user_sku_window), counted by
	// the occupy script; OccupyResult.RetryAfter says when it resets.
	ErrRateLimited = errors.New("too many attempts on this sku")
	// ErrRebalancing: the buyer's bucket of a SKU split into buckets is
	// empty while other buckets hold stock (a transfer is under way);
	// OccupyResult.RetryAfter is short. It wraps ErrRateLimited: the buyer
	// is told 429 with Retry-After, never sold out.
	ErrRebalancing = fmt.Errorf("%w: this item's stock is being rebalanced", ErrRateLimited)
	// ErrUnknownSKU: no activity sells the SKU (or not the one named).
	ErrUnknownSKU = errors.New("unknown sku")
	// ErrLost: Redis lost the SKU's keys (every bucket's, for a split
	// SKU); the watcher rebuilds them from the database.
	ErrLost = errors.New("redis lost the sku; the watcher rebuilds it from the database")
	// ErrBusy: a dependency (Redis, Kafka) failed or timed out. Any stock
	// taken was released (or will be by the orphan sweeper); never a guess
	// of success. The engine answers the same sentinel (engine.ErrBusy).
	ErrBusy = errors.New("system busy")
	// ErrStateLost: Redis holds no state for the SKU (its meta hash is
	// missing): it restarted empty or was flushed and the watcher has not
	// rebuilt the SKU from the database yet. It wraps ErrBusy — the buyer is
	// told busy (fail closed), never "not open" or "unknown".
	ErrStateLost = fmt.Errorf("%w: sku state missing in redis until rebuilt", ErrBusy)
	// ErrNotReplicated: redis.wait_replicas is set and fewer replicas
	// acknowledged an occupy batch within redis.wait_timeout. The batch's
	// occupancies were given back (or are left to the orphan sweeper if
	// that failed too); it wraps ErrBusy — the buyers are told busy.
	ErrNotReplicated = fmt.Errorf("%w: occupy not acknowledged by redis.wait_replicas replicas", ErrBusy)
)
