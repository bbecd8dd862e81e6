package stock

import "errors"

// Outcome is one way an occupy can end. The table below is the one place
// that ties each outcome's names together: the code the occupy scripts
// answer, the sentinel error, the label of seckill_engine_occupy_total and
// the code the engine sidecar's wire carries. The engine, its sidecar and
// the edge all map through it.
type Outcome int

// Occupy outcomes, in the order of the table (and of the metric labels).
const (
	OK Outcome = iota
	NotOpen
	Ended
	SoldOut
	Duplicate
	OverLimit
	// Rebalancing: the buyer's bucket is empty while other buckets of the
	// SKU hold stock; a transfer serves the buyer after a short wait. It
	// is a kind of RateLimited (429 with Retry-After), never a sold-out.
	Rebalancing
	// RateLimited: over the user × SKU window; no other rule was judged.
	RateLimited
	// Missing: Redis lost the SKU's state (ErrStateLost, a kind of busy).
	Missing
	// UnknownSKU: no activity sells the SKU. The engine finds it in the
	// catalog before any script runs, so no script answers it and the
	// occupy metric does not count it.
	UnknownSKU
	// Busy: Redis or Kafka failed, or an answer nobody knows: fail closed.
	Busy
	nOutcomes
)

type outcomeRow struct {
	code  string // the occupy scripts' code; "" where no script answers it
	err   error  // the sentinel; nil for OK
	label string // seckill_engine_occupy_total{code}; "" where not counted
	wire  string // the sidecar protocol's code
}

var outcomes = [nOutcomes]outcomeRow{
	OK:          {CodeOK, nil, "ok", "OK"},
	NotOpen:     {CodeNotOpen, ErrNotOpen, "not_open", "NOT_OPEN"},
	Ended:       {CodeEnded, ErrEnded, "ended", "ENDED"},
	SoldOut:     {CodeSoldOut, ErrSoldOut, "sold_out", "SOLD_OUT"},
	Duplicate:   {CodeDuplicate, ErrDuplicate, "duplicate", "DUPLICATE"},
	OverLimit:   {CodeOverLimit, ErrOverLimit, "over_limit", "OVER_LIMIT"},
	Rebalancing: {CodeRebalancing, ErrRebalancing, "rebalancing", "REBALANCING"},
	RateLimited: {CodeRateLimited, ErrRateLimited, "rate_limited", "RATE_LIMITED"},
	Missing:     {CodeMissing, ErrStateLost, "missing", "MISSING"},
	UnknownSKU:  {"", ErrUnknownSKU, "", "UNKNOWN_SKU"},
	Busy:        {"", ErrBusy, "error", "BUSY"},
}

// Err is the outcome's sentinel; nil for OK.
func (o Outcome) Err() error { return outcomes[o].err }

// Label is the outcome's seckill_engine_occupy_total label ("" for
// UnknownSKU, which that metric does not count).
func (o Outcome) Label() string { return outcomes[o].label }

// Wire is the outcome's code on the sidecar protocol.
func (o Outcome) Wire() string { return outcomes[o].wire }

// String is the wire code.
func (o Outcome) String() string { return o.Wire() }

// OutcomeOfCode maps an occupy script's code to its outcome; false for a
// code no script answers.
func OutcomeOfCode(code string) (Outcome, bool) {
	for o, r := range outcomes {
		if r.code != "" && r.code == code {
			return Outcome(o), true
		}
	}
	return Busy, false
}

// OutcomeOf maps an occupy error (a wrapped sentinel) to its outcome: OK
// for nil, Busy for anything no sentinel matches (fail closed).
func OutcomeOf(err error) Outcome {
	if err == nil {
		return OK
	}
	// In table order, so ErrStateLost is found before the ErrBusy it wraps
	// (and ErrRebalancing before ErrRateLimited).
	for o, r := range outcomes {
		if r.err != nil && errors.Is(err, r.err) {
			return Outcome(o)
		}
	}
	return Busy
}

// OutcomeOfWire maps a sidecar wire code to its outcome; false for a code
// the table does not hold.
func OutcomeOfWire(wire string) (Outcome, bool) {
	for o, r := range outcomes {
		if r.wire == wire {
			return Outcome(o), true
		}
	}
	return Busy, false
}

// Outcomes is how many outcomes there are: every Outcome is below it. The
// occupy metric creates the series of every outcome with a Label at 0.
const Outcomes = int(nOutcomes)
