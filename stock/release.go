package stock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"seckill/lua"
	"seckill/sale"
)

var releaseBatchScript = newPipelined(lua.ReleaseBatch)

func releaseKeys(k sale.SKUKeys) []string {
	return []string{k.Stock, k.Users, k.Sold, k.Claim, k.Closed, k.Qty}
}

// ReleaseOutcome is what a release did.
type ReleaseOutcome int

const (
	// Released: stock restored, the user's record removed.
	Released ReleaseOutcome = iota + 1
	// NotHeld: the record does not name this ticket; nothing changed.
	NotHeld
	// Claimed: the ticket is becoming an order and force was false;
	// nothing changed.
	Claimed
)

func (o ReleaseOutcome) String() string {
	switch o {
	case Released:
		return "released"
	case NotHeld:
		return "not_held"
	case Claimed:
		return "claimed"
	}
	return "unknown"
}

// Release gives m's stock back if the user's record still names
// m.RequestNo: the units the occupancy recorded (the qty hash for SKUs of
// several units per ticket, else one) — never m.Quantity, which a forged
// message could inflate. force also releases a ticket the consumer claimed (its order
// failed for good, or was closed unpaid). Running it twice changes nothing
// the second time. A release that restores stock publishes "available".
// It is ReleaseBatch with one ticket (release_batch.lua).
func (s *Stock) Release(ctx context.Context, m *sale.Message, force bool) (ReleaseOutcome, error) {
	out, err := s.releaseBatch(ctx, []*sale.Message{m}, force, false, true)
	if err != nil {
		return 0, err
	}
	return out[0], nil
}

// ReleaseClosed is the forced Release of a ticket whose order was closed
// unpaid. In the same script it records the close (the SKU's closed hash:
// userId -> requestNo), whatever the outcome, so a retried release leaves
// the same fact: where the activity forbids buying again after a close
// (meta rebuy "0"), occupy refuses that buyer as a duplicate naming the
// closed ticket, while the unit goes back on sale for everyone else.
func (s *Stock) ReleaseClosed(ctx context.Context, m *sale.Message) (ReleaseOutcome, error) {
	out, err := s.releaseBatch(ctx, []*sale.Message{m}, true, true, true)
	if err != nil {
		return 0, err
	}
	return out[0], nil
}

// ReleaseBatch releases many tickets with one release_batch.lua call per
// SKU (at most maxBatch tickets each), the calls of one shard in one
// pipeline: each ticket gets the outcome Release would give it, called
// once per ticket in msgs' order (a ticket given twice is released once).
// A SKU's call costs its shard the same commands whatever the number of
// tickets (see the script's header). out[i] answers msgs[i]. An error is a
// Redis failure of some call; releases are idempotent, so the caller
// retries them all. Each SKU with a ticket released publishes
// "available" once.
func (s *Stock) ReleaseBatch(ctx context.Context, msgs []*sale.Message, force bool) ([]ReleaseOutcome, error) {
	return s.releaseBatch(ctx, msgs, force, false, true)
}

// ReleaseUncounted is Release, not forced, without counting the ticket's
// attempt in the user × SKU window: a drained attempt's (engine queue
// mode), whose occupy counted nothing — the line, not the window, bounds
// its buyer.
func (s *Stock) ReleaseUncounted(ctx context.Context, m *sale.Message) (ReleaseOutcome, error) {
	out, err := s.releaseBatch(ctx, []*sale.Message{m}, false, false, false)
	if err != nil {
		return 0, err
	}
	return out[0], nil
}

// releaseBatch releases msgs; count: each released ticket's attempt is
// counted in the window (SetWindow), where it is on.
func (s *Stock) releaseBatch(ctx context.Context, msgs []*sale.Message, force, closed, count bool) ([]ReleaseOutcome, error) {
	out := make([]ReleaseOutcome, len(msgs))
	head := []string{"0", "0", "0"}
	if force {
		head[0] = "1"
	}
	if closed {
		head[1] = "1"
	}
	keys := releaseKeys
	if x := s.window.Load(); count && x != nil && x.window() {
		// Each released ticket's attempt is counted in the window that
		// holds now (release_batch.lua's KEYS[7]).
		now := time.Now()
		bucket := strconv.FormatInt(x.bucket(now), 10)
		head[2] = strconv.FormatInt(x.end(now), 10)
		keys = func(k sale.SKUKeys) []string { return append(releaseKeys(k), k.Rate+bucket) }
	}
	var failed error
	for _, sc := range s.ticketCalls(msgs, keys, head, appendRelease) {
		for j, r := range releaseBatchScript.exec(ctx, sc.c, sc.execs) {
			call := sc.calls[j]
			codes, err := r.AsStrSlice()
			if err == nil && len(codes) != len(call.idx) {
				err = fmt.Errorf("script answered %d codes for %d tickets", len(codes), len(call.idx))
			}
			if err != nil {
				if failed == nil && len(call.idx) == 1 {
					failed = fmt.Errorf("release %s sku %d: %w", msgs[call.idx[0]].RequestNo, call.sku.sku, err)
				} else if failed == nil {
					failed = fmt.Errorf("release %d tickets of sku %d: %w", len(call.idx), call.sku.sku, err)
				}
				continue
			}
			released := false
			for k, code := range codes {
				switch code {
				case "RELEASED":
					out[call.idx[k]], released = Released, true
				case "NOT_HELD":
					out[call.idx[k]] = NotHeld
				case "CLAIMED":
					out[call.idx[k]] = Claimed
				default:
					if failed == nil {
						failed = fmt.Errorf("release %s: script answered %q", msgs[call.idx[k]].RequestNo, code)
					}
				}
			}
			// Published even when another call failed: these
			// releases happened, and a retry finds them NOT_HELD.
			if released {
				s.publish(ctx, sale.Event{Kind: sale.EventAvailable, Activity: call.sku.activity, SKU: call.sku.sku})
			}
		}
	}
	return out, failed
}

// appendRelease appends a ticket's userId, requestNo and quantity.
func appendRelease(args []string, m *sale.Message) []string {
	return append(args, strconv.FormatInt(m.UserID, 10), m.RequestNo, strconv.FormatInt(m.Quantity, 10))
}
