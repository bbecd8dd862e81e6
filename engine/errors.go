package engine

import (
	"fmt"

	"seckill/stock"
)

// ErrBusy: a dependency (Redis, Kafka, the sidecar) failed or timed out, or
// the engine is shutting down. Any stock taken was released (or will be by
// the orphan sweeper); never a guess of success. It is the stock ledger's
// busy sentinel, so one errors.Is(err, ErrBusy) holds for a busy answer of
// either layer (stock.ErrStateLost wraps it). The other outcomes of Occupy
// are the ledger's sentinels (stock.ErrSoldOut, …; see stock/outcome.go).
var ErrBusy = stock.ErrBusy

// errUnresolved answers a Request without the edge's resolution (no
// activity or SKU): nothing can be occupied for it.
var errUnresolved = fmt.Errorf("%w: the request names no resolved activity and SKU", stock.ErrUnknownSKU)

// ErrBadQuantity answers a Request whose Quantity is below 1: refused before
// any script runs (the occupy script refuses it too). It wraps
// stock.ErrOverLimit — the quantity is outside 1..limit — so it maps to the
// over-limit answer everywhere.
var ErrBadQuantity = fmt.Errorf("%w: quantity must be at least 1", stock.ErrOverLimit)

// Outcome is one way an Occupy ends: the ledger's outcome table
// (stock/outcome.go), so the edge classifies the engine's answers without
// importing the ledger.
type Outcome = stock.Outcome

// Occupy outcomes (the table's rows).
const (
	OK          = stock.OK
	NotOpen     = stock.NotOpen
	Ended       = stock.Ended
	SoldOut     = stock.SoldOut
	Duplicate   = stock.Duplicate
	OverLimit   = stock.OverLimit
	Rebalancing = stock.Rebalancing
	RateLimited = stock.RateLimited
	Missing     = stock.Missing
	UnknownSKU  = stock.UnknownSKU
	Busy        = stock.Busy
)

// OutcomeOf maps an Occupy error to its outcome: OK for nil, Busy for
// anything no sentinel matches (fail closed).
func OutcomeOf(err error) Outcome { return stock.OutcomeOf(err) }
