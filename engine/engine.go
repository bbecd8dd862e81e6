// Package engine is the request path of a purchase: it occupies stock for a
// buyer through the stock ledger (package stock: one Lua script on the Redis
// shard that owns the SKU, group-committed by Batcher, which in the same
// call counts the user × SKU window and writes the QUEUING result),
// produces the order message to Kafka (Sarama, acks=all) and waits for the
// ack, and releases the occupancy when the message cannot be made durable.
//
// The edge resolves what an attempt buys (the activity and SKU, from its
// catalog view) and hands the engine that resolution: the engine does not
// look the SKU up again. It runs in-process with the edge (New) or as a
// sidecar process the edge calls over a local socket (see sidecar.go, where
// the resolution travels as ids); both satisfy Engine.
package engine

import (
	"context"
	"time"

	"seckill/sale"
)

// Engine takes purchase attempts. Implementations are safe for concurrent
// use.
type Engine interface {
	// Occupy takes stock for r and answers with a queue ticket once the
	// order message is durable. On stock.ErrDuplicate the Ticket names the
	// ticket the user already holds. Any other error is one of the
	// sentinels of the occupy outcome table (stock/outcome.go), wrapped.
	Occupy(ctx context.Context, r *Request) (Ticket, error)
}

// Request is one purchase attempt, already validated and resolved by the
// edge.
type Request struct {
	// Activity and SKU are the catalog entries the edge resolved the
	// attempt to (read only): the engine occupies and prices by them as
	// they are. Both are required; a request without them is
	// stock.ErrUnknownSKU.
	Activity *sale.Activity
	SKU      *sale.SKU
	UserID   int64
	Quantity int64
	TraceID  string
	// RequestNo is the ticket number the attempt already has (an attempt
	// drained from its SKU's waiting line): occupied under it, so a
	// redelivered attempt finds its own record. Empty: a fresh number.
	// The sidecar protocol does not carry it (the drainer runs beside its
	// in-process engine).
	RequestNo string
	// Queued, when set, is called once the occupy holds its place in the
	// SKU's group commit (stock.Extras.Queued): the drainer starts a line's
	// next attempt only then, so the line's order is the order its
	// attempts reach the ledger. In-process engine only.
	Queued func()
	// Place is a drained attempt's "<partition>:<offset>" in its line:
	// when its order message cannot be sent, the released ticket's result
	// goes back to WAITING there (the drainer retries it), not FAIL BUSY,
	// and the user × SKU window is not counted (the line, not the buyer,
	// occupies it again).
	Place string
}

// resolved reports whether r carries the edge's resolution.
func (r *Request) resolved() bool { return r.Activity != nil && r.SKU != nil }

// Ticket is the engine's answer.
type Ticket struct {
	RequestNo string
	// Remaining is the SKU's remaining stock as the script saw it after
	// this call, or -1 where the script did not read it.
	Remaining int64
	// RetryAfter is how long until the user × SKU window lets the buyer
	// try again, with stock.ErrRateLimited.
	RetryAfter time.Duration
}
