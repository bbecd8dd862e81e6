package stock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"seckill/lua"
	"seckill/sale"
)

// The pending journal (DESIGN §5, sk:{a…:s…}:pending): a sorted set with
// one entry per occupy call that took stock, member the "userId:requestNo"
// of each ticket the call took joined by ",", score the accept time in
// Redis server milliseconds. Claims and releases do not touch it, so an
// accepted buyer costs its shard a part of one ZADD and nothing more; the
// orphan sweeper reads the entries older than its grace period
// (PendingIn), and that read removes each entry none of whose tickets is
// held unclaimed any more. Every unclaimed record is in an entry; an entry
// may also name tickets claimed or released since. The sweeper's work so
// grows with the calls of its grace period and the orphans left, not with
// every buyer the SKU ever had. A ticket taken by a binary older than the
// journal is not in it until the reconciler's full comparison puts it
// there (Reindex).

// pendingPageTickets bounds the tickets one PendingIn call judges (the
// page ends after the entry that reaches it): one script call stays short
// on a shard that serves buyers.
const pendingPageTickets = 2048

var pendingPageScript = rueidis.NewLuaScript(lua.PendingPage)

// PendingTicket is one ticket of the pending journal.
type PendingTicket struct {
	UserID    int64
	RequestNo string
	// At is the accept time: Redis server time when the occupy script took
	// the stock (the requestNo's time for an entry Reindex added).
	At time.Time
	// Units the ticket holds, from the qty hash; 0 where not recorded (a
	// SKU of one unit per ticket records none). Read by PendingIn only.
	Units int64
}

// PendingMember is the journal's name of userId's ticket requestNo, as the
// scripts build it: an entry joins those of its tickets with ",".
func PendingMember(user int64, requestNo string) string {
	return strconv.FormatInt(user, 10) + ":" + requestNo
}

// parseEntry appends the tickets of one journal entry (member, score ms)
// to ts. A part that is not userId:requestNo (not written by the scripts:
// a hand edit) is skipped.
func parseEntry(ts []PendingTicket, member string, ms float64) []PendingTicket {
	at := time.UnixMilli(int64(ms))
	for part := range strings.SplitSeq(member, ",") {
		u, rn, ok := strings.Cut(part, ":")
		user, err := strconv.ParseInt(u, 10, 64)
		if !ok || err != nil || rn == "" {
			continue
		}
		ts = append(ts, PendingTicket{UserID: user, RequestNo: rn, At: at})
	}
	return ts
}

// PendingPage is one page of the pending journal (PendingIn).
type PendingPage struct {
	// Tickets held and not claimed, of the entries read, oldest first.
	Tickets []PendingTicket
	// Kept is how many of the entries read are still in the journal (the
	// others were spent and removed): the next page's offset grows by it.
	Kept int
	// More: entries accepted before the page's time may follow.
	More bool
}

// Pending reads one page of the pending journal of (activity, sku): the
// entries accepted before before (by Redis server time), oldest first,
// skipping the first offset of them, at most count entries and about
// pendingPageTickets tickets; it removes those of them that are spent (no
// ticket held unclaimed) and returns the tickets that are not. One
// pending_page.lua call, plus, on a SKU of several units per ticket, one
// HMGET of the tickets' units. Like the other ledger reads it routes by
// sku.Hot.
func (s *Stock) Pending(ctx context.Context, activity int64, sku *sale.SKU, before time.Time, offset, count int) (PendingPage, error) {
	return s.PendingIn(ctx, activity, sku, sale.NoBucket, before, offset, count)
}

// PendingIn is Pending of bucket b of a SKU split into buckets (each
// bucket has its own journal; sale.NoBucket is the SKU's own).
func (s *Stock) PendingIn(ctx context.Context, activity int64, sku *sale.SKU, b int, before time.Time, offset, count int) (PendingPage, error) {
	k := sale.KeysIn(activity, sku.ID, b)
	c := s.bucketClient(activity, sku, b)
	vals, err := pendingPageScript.Exec(ctx, c, []string{k.Users, k.Claim, k.Pending}, []string{
		strconv.FormatInt(before.UnixMilli(), 10), strconv.Itoa(offset), strconv.Itoa(count),
		strconv.Itoa(pendingPageTickets)}).ToArray()
	if err == nil && (len(vals) < 3 || (len(vals)-3)%3 != 0) {
		err = fmt.Errorf("script answered %d values", len(vals))
	}
	if err != nil {
		return PendingPage{}, fmt.Errorf("pending activity %d sku %d: %w", activity, sku.ID, err)
	}
	var p PendingPage
	kept, _ := vals[1].AsInt64()
	more, _ := vals[2].AsInt64()
	p.Kept, p.More = int(kept), more == 1
	p.Tickets = make([]PendingTicket, 0, (len(vals)-3)/3)
	for i := 3; i+2 < len(vals); i += 3 {
		u, _ := vals[i].ToString()
		rn, _ := vals[i+1].ToString()
		score, _ := vals[i+2].ToString()
		ms, err := strconv.ParseFloat(score, 64)
		if err != nil {
			continue
		}
		p.Tickets = parseEntry(p.Tickets, u+":"+rn, ms)
	}
	if sku.LimitPerUser > 1 && len(p.Tickets) > 0 {
		rns := make([]string, len(p.Tickets))
		for i, t := range p.Tickets {
			rns[i] = t.RequestNo
		}
		qs, err := c.Do(ctx, c.B().Hmget().Key(k.Qty).Field(rns...).Build()).ToArray()
		if err != nil {
			return PendingPage{}, fmt.Errorf("pending units activity %d sku %d: %w", activity, sku.ID, err)
		}
		for i := range p.Tickets {
			if i < len(qs) {
				if q, err := qs[i].AsInt64(); err == nil {
					p.Tickets[i].Units = q
				}
			}
		}
	}
	return p, nil
}

// Reindex puts in the pending journal of (activity, sku) the tickets ts
// whose record is held and not claimed (reindex.lua, judged atomically per
// ticket), a one-ticket entry each under its At; the caller found them in
// no entry. It returns how many entries it added.
func (s *Stock) Reindex(ctx context.Context, activity int64, sku *sale.SKU, ts []PendingTicket) (added int64, err error) {
	if !sku.Split() {
		return s.reindexIn(ctx, activity, sku, sale.NoBucket, ts)
	}
	// Each ticket's entry is in the journal of the bucket its number names.
	var part []PendingTicket
	for b := 0; b < sku.Buckets; b++ {
		part = part[:0]
		for _, t := range ts {
			if sale.TicketBucket(t.RequestNo) == b {
				part = append(part, t)
			}
		}
		if len(part) == 0 {
			continue
		}
		a, err := s.reindexIn(ctx, activity, sku, b, part)
		added += a
		if err != nil {
			return added, err
		}
	}
	return added, nil
}

// reindexIn is Reindex on bucket b (the SKU's own keys for sale.NoBucket).
func (s *Stock) reindexIn(ctx context.Context, activity int64, sku *sale.SKU, b int, ts []PendingTicket) (added int64, err error) {
	k := sale.KeysIn(activity, sku.ID, b)
	for len(ts) > 0 {
		part := ts[:min(len(ts), 1000)]
		ts = ts[len(part):]
		args := make([]string, 0, 3*len(part))
		for _, t := range part {
			args = append(args, strconv.FormatInt(t.UserID, 10), t.RequestNo, strconv.FormatInt(t.At.UnixMilli(), 10))
		}
		v, err := reindexScript.Exec(ctx, s.recordsClient(activity, sku, b), []string{k.Users, k.Claim, k.Pending}, args).AsInt64()
		if err != nil {
			return added, fmt.Errorf("reindex activity %d sku %d bucket %d: %w", activity, sku.ID, b, err)
		}
		added += v
	}
	return added, nil
}
