package reqlog

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync"
	"time"

	"seckill/store"
)

// Refusals are the purchase attempts refused after they cost something
// (the engine's DUPLICATE, SOLD_OUT, OVER_LIMIT, RATE_LIMITED, BUSY, …; a
// risk refusal; a token refusal; an attempt the line's drainer refused,
// whose detail names its ticket). Each gets a REJECTED row of its own —
// there is no ticket to hang it on — under a number of the form
// "R-<unix ms>-<random hex>" that no ticket has, so support finds it by
// the buyer (UserRequests). They travel on a queue of their own: a flood
// of refusals (a bot the risk service denies) fills and drops only that
// queue, never a ticket's steps. One batch folds the refusals of one
// buyer, activity, SKU and reason into one row counting them.

// refusal is one queued refusal.
type refusal struct {
	activity, sku, user, quantity int64
	reason, detail, trace         string
	at                            time.Time
}

// Refused queues a refused attempt: its activity, SKU, buyer, quantity,
// the reason code (the code the buyer was answered: SOLD_OUT, DUPLICATE,
// RISK_REJECTED, TOKEN_INVALID, BUSY, …), a detail (the ticket a DUPLICATE
// names; may be empty) and the trace id. It never blocks: a full queue
// drops it and counts it (seckill_reqlog_steps_total{outcome="dropped"}).
func (w *Writer) Refused(activity, sku, user, quantity int64, reason, detail, traceID string) {
	select {
	case w.refusals <- refusal{activity: activity, sku: sku, user: user, quantity: quantity, reason: reason,
		detail: detail, trace: traceID, at: time.Now()}:
	default:
		w.steps.WithLabelValues("dropped").Inc()
	}
}

// TokenVerified implements edge.DecisionLog: TOKEN_VERIFIED into the
// ticket's history at the time the token was spent.
func (w *Writer) TokenVerified(requestNo string, at time.Time) {
	w.Append(store.Event{RequestNo: requestNo, Status: store.StatusTokenVerified, Remark: "qualification token spent", At: at})
}

type rejectKey struct {
	activity, sku int64
	reason        string
	minute        int64
}

// counts gathers the edge's free-rejection counts between writes; adding
// to it is a map update under a lock, once per counter per flush (the
// edge counts per request in atomics of its own).
type counts struct {
	mu sync.Mutex
	m  map[rejectKey]int64
}

// maxCountKeys bounds what counts holds between writes; past it new keys
// are dropped and counted.
const maxCountKeys = 10000

// Rejected implements edge.DecisionLog: adds n free rejections of
// (activity, sku, reason) in minute to the next write.
func (w *Writer) Rejected(activity, sku int64, reason string, minute time.Time, n int64) {
	if w.addCount(activity, sku, reason, minute, n) {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// addCount adds to counts; false when nothing was added.
func (w *Writer) addCount(activity, sku int64, reason string, minute time.Time, n int64) bool {
	if n <= 0 {
		return false
	}
	k := rejectKey{activity, sku, reason, minute.Truncate(time.Minute).UnixMilli()}
	w.counts.mu.Lock()
	_, had := w.counts.m[k]
	if !had && len(w.counts.m) >= maxCountKeys {
		w.counts.mu.Unlock()
		w.steps.WithLabelValues("dropped").Inc()
		return false
	}
	w.counts.m[k] += n
	w.counts.mu.Unlock()
	return true
}

// takeCounts empties counts.
func (w *Writer) takeCounts() []store.RejectCount {
	w.counts.mu.Lock()
	defer w.counts.mu.Unlock()
	if len(w.counts.m) == 0 {
		return nil
	}
	out := make([]store.RejectCount, 0, len(w.counts.m))
	for k, n := range w.counts.m {
		out = append(out, store.RejectCount{ActivityID: k.activity, SKUID: k.sku, Reason: k.reason,
			Minute: time.UnixMilli(k.minute), N: n})
		delete(w.counts.m, k)
	}
	return out
}

type foldKey struct {
	activity, sku, user int64
	reason              string
}

// refusalEntries turns a batch of refusals into request-log rows, one per
// buyer, activity, SKU and reason.
func refusalEntries(rs []refusal) []store.LogEntry {
	idx := make(map[foldKey]int, len(rs))
	var out []store.LogEntry
	var times []int
	for i := range rs {
		r := &rs[i]
		k := foldKey{r.activity, r.sku, r.user, r.reason}
		if j, ok := idx[k]; ok {
			times[j]++
			out[j].Updated = r.at
			continue
		}
		idx[k] = len(out)
		times = append(times, 1)
		out = append(out, store.LogEntry{RequestNo: refusalNo(r.at), ActivityID: r.activity, SKUID: r.sku,
			UserID: r.user, Quantity: r.quantity, Status: store.StatusRejected, TraceID: r.trace,
			Remark: refusalRemark(r.reason, r.detail), Created: r.at, At: r.at})
	}
	for j := range out {
		if times[j] > 1 {
			out[j].Remark += " (×" + strconv.Itoa(times[j]) + " within one write)"
		}
	}
	return out
}

// refusalRemark is "REASON" or "REASON: detail".
func refusalRemark(reason, detail string) string {
	if detail == "" {
		return reason
	}
	return reason + ": " + detail
}

// refusalNo is a fresh number for a refusal's row.
func refusalNo(at time.Time) string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return "R-" + strconv.FormatInt(at.UnixMilli(), 10) + "-" + hex.EncodeToString(b[:])
}
