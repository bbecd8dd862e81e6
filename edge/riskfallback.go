package edge

import (
	"context"
	"time"

	"github.com/redis/rueidis"
	"github.com/sony/gobreaker/v2"
	"go.uber.org/zap"

	"seckill/internal/ratelimit"
	"seckill/internal/riskaudit"
)

// The risk fallback (seed 001 §16, scenario 5): when the risk service is
// slow or down, the edge neither waits on it nor gives up on its buyers.
//
//   - A circuit breaker (sony/gobreaker, edge.risk.breaker) around the
//     calls: after edge.risk.breaker.failures failures in a row it opens,
//     and for edge.risk.breaker.open_for no call is made — each purchase is
//     judged at once instead of waiting out edge.risk.timeout; then
//     edge.risk.breaker.probes calls probe the service (a purchase's or
//     the re-check's) and close it again, or open it for another period.
//   - Under the policy allow, a purchase without a verdict (timeout,
//     error, breaker open) meets the local rules: a user's cached verdict
//     (edge.risk.cache_ttl, looked up before any call), the blocklists
//     (admission ran them), and a velocity rule per device (X-Device-Id)
//     and per client address (edge.risk.local.*_per_minute, counted only
//     for purchases without a verdict). Refused: 403 RISK_REJECTED.
//   - A purchase that passed unchecked and got a ticket is recorded
//     (package riskaudit, on the default Redis) and re-checked every
//     edge.risk.recheck_interval, through the breaker, once the service
//     answers. A re-check that allows closes the record; one that refuses
//     marks it deny and, with edge.risk.block_on_recheck_deny, puts the
//     user on the user blocklist: the ticket (and its order) stands — the
//     buyer was told QUEUING and may have paid; what to do with it is
//     on-call's call, from `seckill admin risk unchecked --state deny` —
//     but the account buys nothing more.

// Outcomes of re-checks: seckill_edge_risk_rechecks_total{outcome}.
const (
	recheckAllow = iota
	recheckDeny
	recheckFailed     // the service gave no verdict: left pending
	recheckUnrecorded // the unchecked purchase could not be recorded
	nRecheckOutcomes
)

var recheckOutcomeNames = [nRecheckOutcomes]string{
	recheckAllow: "allow", recheckDeny: "deny", recheckFailed: "failed", recheckUnrecorded: "unrecorded",
}

// blockUser puts a user on the user blocklist (every edge).
type blockUser func(ctx context.Context, user int64) error

// fallback is the breaker, the local rules and the re-check. Safe for
// concurrent use.
type fallback struct {
	breaker      *gobreaker.CircuitBreaker[int]
	devices, ips *ratelimit.Local // nil: the rule is off
	rdb          rueidis.Client
	block        blockUser
	blockOnDeny  bool
	every        time.Duration
	batch        int
	m            *metrics
	log          *zap.Logger
}

func newFallback(cfg RiskConfig, m *metrics, rdb rueidis.Client, block blockUser, log *zap.Logger) fallback {
	f := fallback{rdb: rdb, block: block, blockOnDeny: cfg.BlockOnRecheckDeny, every: cfg.RecheckInterval,
		batch: cfg.RecheckBatch, m: m, log: log}
	failures := cfg.Breaker.Failures
	f.breaker = gobreaker.NewCircuitBreaker[int](gobreaker.Settings{
		Name:        "risk",
		MaxRequests: cfg.Breaker.Probes,
		Timeout:     cfg.Breaker.OpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= failures },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			m.riskBreaker.Set(float64(to))
			log.Warn("edge risk breaker changed state", zap.String("from", from.String()), zap.String("to", to.String()))
		},
	})
	perMinute := func(n int) *ratelimit.Local {
		if n <= 0 {
			return nil
		}
		return ratelimit.NewLocal(float64(n)/60, n, cfg.Local.MaxKeys, nil)
	}
	f.devices, f.ips = perMinute(cfg.Local.DevicePerMinute), perMinute(cfg.Local.IPPerMinute)
	return f
}

// local runs the velocity rules for a purchase without a verdict. Both
// rules count the attempt; the device rule applies to purchases that name
// a device (a header a client may leave out: the IP rule is the floor).
func (f *fallback) local(ip, device []byte) bool {
	ok := true
	if f.devices != nil && len(device) > 0 {
		if allowed, _ := f.devices.Allow(ratelimit.KeyString(device)); !allowed {
			ok = false
		}
	}
	if f.ips != nil {
		if allowed, _ := f.ips.Allow(ratelimit.KeyString(ip)); !allowed {
			ok = false
		}
	}
	return ok
}

// record keeps a purchase that got ticket requestNo without a verdict, for
// the re-check. It runs on the buyer's path, only in a degraded sale, and
// waits at most timeout: the purchase stands either way (a record that
// could not be written is counted and logged, never silent).
func (f *fallback) record(ctx context.Context, timeout time.Duration, requestNo string, q riskQuery, ip, device []byte, why int) {
	r := riskaudit.Record{RequestNo: requestNo, User: q.user, Activity: q.activity, SKU: q.sku, Quantity: q.quantity,
		IP: string(ip), Why: riskFailureNames[why], At: time.Now().UnixMilli()}
	if len(device) > 0 && len(device) <= maxDeviceIDLen {
		r.Device = string(device)
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := riskaudit.Add(rctx, f.rdb, r); err != nil {
		f.m.riskRechecks[recheckUnrecorded].Inc()
		f.log.Error("edge could not record a purchase that passed unchecked; it will not be re-checked",
			zap.String("requestNo", requestNo), zap.Int64("userId", q.user), zap.Error(err))
		return
	}
	f.m.riskUnchecked.Inc()
}

// recheckLoop re-checks the recorded purchases until ctx ends.
func (r *riskCheck) recheckLoop(ctx context.Context, timeout time.Duration, done func()) {
	defer done()
	t := time.NewTicker(r.fb.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := r.recheck(ctx, timeout); err != nil && ctx.Err() == nil {
			r.warn.warn("edge risk re-check pass failed; retried next interval", err)
		}
	}
}

// recheck runs one pass: the oldest pending records, each asked of the
// service through the breaker, until one gets no verdict (the service is
// not back: the rest waits for the next pass).
func (r *riskCheck) recheck(ctx context.Context, timeout time.Duration) error {
	if r.fb.breaker.State() == gobreaker.StateOpen {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	recs, err := riskaudit.Oldest(rctx, r.fb.rdb, r.fb.batch)
	cancel()
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if ctx.Err() != nil {
			return nil
		}
		q := riskQuery{user: rec.User, activity: rec.Activity, sku: rec.SKU, quantity: rec.Quantity}
		verdict, _, err := r.ask(q, []byte(rec.IP), []byte(rec.Device))
		if err != nil {
			r.m.riskRechecks[recheckFailed].Inc()
			return nil
		}
		rec.CheckedAt = time.Now().UnixMilli()
		rec.State = riskaudit.Allowed
		if verdict == riskDeny {
			rec.State, rec.Action = riskaudit.Denied, "flagged"
			if r.cache != nil {
				r.cache.SetWithTTL(rec.User, false, 1, r.ttl)
			}
			if r.fb.blockOnDeny && r.fb.block != nil {
				bctx, cancel := context.WithTimeout(ctx, timeout)
				err := r.fb.block(bctx, rec.User)
				cancel()
				if err != nil {
					return err // the record stays pending: the next pass blocks again
				}
				rec.Action = "user blocked"
			}
		}
		rctx, cancel := context.WithTimeout(ctx, timeout)
		err = riskaudit.Resolve(rctx, r.fb.rdb, rec)
		cancel()
		if err != nil {
			return err
		}
		if rec.State == riskaudit.Denied {
			r.m.riskRechecks[recheckDeny].Inc()
			r.fb.log.Warn("edge risk re-check refused a purchase that passed unchecked", zap.String("requestNo", rec.RequestNo),
				zap.Int64("userId", rec.User), zap.String("action", rec.Action))
		} else {
			r.m.riskRechecks[recheckAllow].Inc()
		}
	}
	return nil
}
