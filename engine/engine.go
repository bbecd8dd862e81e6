// Package engine is the request path of a purchase: it occupies stock for a
// buyer through the stock ledger (package stock: one Lua script on the Redis
// shard that owns the SKU, group-committed by Batcher), writes the QUEUING
// result, produces the order message to Kafka (Sarama, acks=all) and waits
// for the ack, and releases the occupancy when the message cannot be made
// durable.
//
// It runs in-process with the edge (New) or as a sidecar process the edge
// calls over a local socket (see sidecar.go); both satisfy Engine.
package engine

import "context"

// Engine takes purchase attempts. Implementations are safe for concurrent
// use.
type Engine interface {
	// Occupy takes stock for r and answers with a queue ticket once the
	// order message is durable. On stock.ErrDuplicate the Ticket names the
	// ticket the user already holds. Any other error is one of the
	// sentinels of the occupy outcome table (stock/outcome.go), wrapped.
	Occupy(ctx context.Context, r *Request) (Ticket, error)
}

// Request is one purchase attempt, already validated by the edge.
type Request struct {
	ActivityID int64 // 0: the SKU's current activity
	SKUID      int64
	UserID     int64
	Quantity   int64
	TraceID    string
}

// Ticket is the engine's answer.
type Ticket struct {
	RequestNo string
	// ActivityID is the activity the request was resolved to.
	ActivityID int64
	// Remaining is the SKU's remaining stock as the script saw it after
	// this call, or -1 where the script did not read it.
	Remaining int64
}
