package edge

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/valyala/fasthttp"

	"seckill/engine"
)

// The request log's share of the edge (DESIGN §3, §7): every purchase
// refused after it cost something — the engine's answers other than
// QUEUING, a risk refusal, a token refusal — is handed to the DecisionLog
// with its buyer, activity, SKU, reason and trace id; the free rejections
// (not open, ended, the sold-out flag, the per-user limit, the per-SKU
// gate; per-IP limits and unknown SKUs, which have no SKU of ours, under
// activity and SKU 0) are counted in atomics and handed over as
// per-minute counts every edge.reject_flush. A ticket's TOKEN_VERIFIED step is
// handed over once the ticket exists.

// DecisionLog receives the edge's decisions. Every method is called on or
// near the buyer's path and must not block (package reqlog queues them).
type DecisionLog interface {
	// Refused records one refused attempt: reason is the code the buyer
	// was answered (SOLD_OUT, DUPLICATE, …), detail what names it (the
	// held ticket of a DUPLICATE; may be empty).
	Refused(activity, sku, user, quantity int64, reason, detail, traceID string)
	// TokenVerified records that the purchase which got ticket requestNo
	// spent its qualification token at at.
	TokenVerified(requestNo string, at time.Time)
	// Rejected adds n free rejections of (activity, sku, reason) within
	// the minute of minute.
	Rejected(activity, sku int64, reason string, minute time.Time, n int64)
}

// WithDecisionLog hands the edge's decisions to l, and its free rejection
// counts every edge.reject_flush.
func WithDecisionLog(l DecisionLog) Option { return func(s *Server) { s.decisions = l } }

// engineCodes are the reason codes of the engine's refusals, by outcome.
var engineCodes = [nOutcomes]string{
	outcomeNotOpen:     "NOT_OPEN",
	outcomeEnded:       "ENDED",
	outcomeSoldOut:     "SOLD_OUT",
	outcomeDuplicate:   "DUPLICATE",
	outcomeOverLimit:   "OVER_LIMIT",
	outcomeRateLimited: "RATE_LIMITED",
	outcomeUnknownSKU:  "UNKNOWN_SKU",
	outcomeBusy:        "BUSY",
}

// engineRefused records an Occupy that did not queue a ticket.
func (s *Server) engineRefused(r *engine.Request, t engine.Ticket, err error) {
	if s.decisions == nil || err == nil {
		return
	}
	outcome, _ := engineOutcome(err)
	var detail string
	switch outcome {
	case outcomeQueued:
		return
	case outcomeDuplicate:
		detail = "holds ticket " + t.RequestNo
	case outcomeBusy:
		detail = err.Error()
	}
	s.decisions.Refused(r.Activity.ID, r.SKU.ID, r.UserID, r.Quantity, engineCodes[outcome], detail, r.TraceID)
}

// refused records a refusal the edge decided after a cost (risk, token):
// a's code is the reason.
func (s *Server) refused(ctx *fasthttp.RequestCtx, v *view, user int64, o *order, a *answer, detail string) {
	if s.decisions == nil {
		return
	}
	s.decisions.Refused(v.activity, v.sku.ID, user, o.Quantity, a.code, detail, traceID(ctx, o))
}

// riskRefused records the risk check's refusal: its 403, or its 503 under
// a deny policy.
func (s *Server) riskRefused(ctx *fasthttp.RequestCtx, v *view, user int64, o *order) {
	if ctx.Response.StatusCode() == fasthttp.StatusForbidden {
		s.refused(ctx, v, user, o, ansRiskRejected, "")
		return
	}
	s.refused(ctx, v, user, o, ansCheckBusy, "risk service unavailable and the policy is deny")
}

// freeCounts are one (activity, SKU)'s free rejections since the last
// flush, by reason. Lock-free.
type freeCounts [nReasons]atomic.Int64

// free counts a free rejection of reason. A nil tally counts nothing.
func (c *skuTally) free(reason int) {
	if c != nil {
		c.freeN[reason].Add(1)
	}
}

// globalFree are the reasons counted under activity and SKU 0: decided
// before a SKU of the catalog is known.
var globalFree = [...]int{reasonRateIP, reasonBlockedIP, reasonUnknownSKU}

// flushRejections hands the counts gathered since the last call to the
// DecisionLog; last holds the global counters' values at the last call.
func (s *Server) flushRejections(now time.Time, last *[nReasons]float64) {
	for k, c := range *s.views.tallies.m.Load() {
		for i := range c.freeN {
			if n := c.freeN[i].Swap(0); n > 0 {
				s.decisions.Rejected(k.activity, k.sku, reasons[i], now, n)
			}
		}
	}
	for _, i := range globalFree {
		v := counterValue(s.m.rejections[i])
		if d := int64(v - last[i]); d > 0 {
			s.decisions.Rejected(0, 0, reasons[i], now, d)
		}
		last[i] = v
	}
}

// flushLoop flushes every edge.reject_flush until ctx ends, then once
// more.
func (s *Server) flushLoop(ctx context.Context) {
	defer s.wg.Done()
	var last [nReasons]float64
	for _, i := range globalFree {
		last[i] = counterValue(s.m.rejections[i])
	}
	t := time.NewTicker(s.cfg.RejectFlush)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			s.flushRejections(now, &last)
		case <-ctx.Done():
			s.flushRejections(time.Now(), &last)
			return
		}
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if c.Write(&m) != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

// traceID is the purchase's trace id: the gateway's X-Trace-Id, else the
// client's requestId (engine.Request has no field for the idempotency
// key; it travels as the trace id); empty when neither is given.
func traceID(ctx *fasthttp.RequestCtx, o *order) string {
	if tr := ctx.Request.Header.Peek("X-Trace-Id"); len(tr) > 0 && len(tr) <= maxRequestIDLen {
		return string(tr)
	}
	return string(o.RequestID)
}
