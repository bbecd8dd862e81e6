package edge

import (
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"seckill/internal/identity"
	"seckill/internal/ratelimit"
)

// Admission: who may come in and how often, in the order the checks run,
// cheapest first (edge.rate, edge.blocklist):
//
//  1. before routing, every request but /healthz, /readyz and /metrics:
//     the client address (clientip.go) against the IP blocklist (403), then
//     the per-IP limit unless the address is exempt (429);
//  2. purchase and token requests: X-User-Id under edge.identity (401/400),
//     the user blocklist
//     (403), the per-user limit (429);
//  3. purchases that passed every local check (body, window, sold-out flag,
//     token signature): while the consumers' backlog is over
//     consumer.lag_high, a share of their drain rate (backlog.go; 429
//     BACKLOG); a place among the SKU's attempts in flight
//     (edge.rate.sku_inflight; 429), held until the engine has answered,
//     then the per-SKU admission gate (429), which a recent ticket holder
//     passes without spending (holders.go).
//
// The user × SKU window (edge.rate.user_sku_limit per user_sku_window) is
// not counted here: the engine's occupy script counts it in the same call
// that takes the stock, on the SKU's shard, so it costs an accepted buyer
// no Redis call of its own; its RATE_LIMITED answer becomes a 429 with the
// script's Retry-After (order.go).
//
// Every 429 carries Retry-After in whole seconds, at least 1. Nothing here
// allocates on the hot path.

// admission runs those checks. Each check that refuses has answered when it
// returns false. Safe for concurrent use; SetRate (reload.go) swaps its
// limits while it serves.
type admission struct {
	out answers
	log *zap.Logger

	trusted  []netip.Prefix         // edge.trusted_proxies
	ident    *identity.Verifier     // edge.identity
	block    *blocklists            // edge.blocklist ∪ Redis
	lim      atomic.Pointer[limits] // edge.rate, swapped by setRate
	gate     *ratelimit.Gate        // edge.rate.gate_*
	live     atomic.Int64           // the live edge count last seen (fleet.go), at least 1
	inflight *ratelimit.Inflight    // edge.rate.sku_inflight
	backlog  *backlog               // consumer.lag_high (backlog.go); nil: off
	rateMu   sync.Mutex             // serialises setRate; never taken by a request
}

func newAdmission(cfg *Config, block *blocklists, out answers, log *zap.Logger) *admission {
	a := &admission{out: out, log: log, block: block}
	// Validate has parsed these already.
	a.trusted, _ = parsePrefixes("edge.trusted_proxies", cfg.TrustedProxies)
	a.ident, _ = cfg.NewIdentity()
	a.lim.Store(newLimits(cfg.Rate, nil))
	a.live.Store(1)
	gk, gf := cfg.Rate.gateShare(1)
	a.gate = ratelimit.NewGate(gk, gf, nil)
	a.inflight = ratelimit.NewInflight(cfg.Rate.SKUInflight)
	a.inflight.SetWait(cfg.Rate.SKUInflightWait)
	return a
}

// limits are the rate-limit layers built from edge.rate, immutable once
// published: a reload (SetRate) builds new ones and swaps the pointer, so a
// request reads its limits with one atomic load and no lock. The gate and
// the in-flight bound are not here: they keep their state across reloads
// and take their new settings in place (admission.gate, .inflight).
type limits struct {
	cfg    RateConfig // what they were built from
	ip     *ratelimit.Local
	exempt []netip.Prefix
	user   *ratelimit.Local
}

// newLimits builds the layers; a disabled layer is nil (its Allow passes).
// An in-process layer whose settings are those of old is carried over with
// its state (old may be nil): a reload that changes only the gate does not
// hand every client a fresh burst.
func newLimits(c RateConfig, old *limits) *limits {
	l := &limits{cfg: c}
	l.cfg.IPExempt = slices.Clone(c.IPExempt)
	if c.IPPerSecond > 0 {
		if old != nil && old.ip != nil && old.cfg.IPPerSecond == c.IPPerSecond && old.cfg.IPBurst == c.IPBurst && old.cfg.MaxKeys == c.MaxKeys {
			l.ip = old.ip
		} else {
			l.ip = ratelimit.NewLocal(c.IPPerSecond, c.IPBurst, c.MaxKeys, nil)
		}
		l.exempt, _ = parsePrefixes("edge.rate.ip_exempt", c.IPExempt)
	}
	if c.UserPerSecond > 0 {
		if old != nil && old.user != nil && old.cfg.UserPerSecond == c.UserPerSecond && old.cfg.UserBurst == c.UserBurst && old.cfg.MaxKeys == c.MaxKeys {
			l.user = old.user
		} else {
			l.user = ratelimit.NewLocal(c.UserPerSecond, c.UserBurst, c.MaxKeys, nil)
		}
	}
	return l
}

// gateShare is this edge's share of the admission gate: gate_k and
// gate_floor divided among gate_edges edges, or among the live ones
// (live ≥ 1) when gate_edges is 0.
func (c *RateConfig) gateShare(live int64) (k, floor float64) {
	n := float64(max(live, 1))
	if c.GateEdges > 0 {
		n = float64(c.GateEdges)
	}
	return c.GateK / n, c.GateFloor / n
}

// setLive re-splits the gate for n live edges (the heartbeat's count).
// rateMu orders it with a reload, so the share always comes from the
// edge.rate in force; requests never take it.
func (a *admission) setLive(n int64) {
	if a.live.Swap(n) == n {
		return
	}
	a.rateMu.Lock()
	a.gate.Set(a.lim.Load().cfg.gateShare(n))
	a.rateMu.Unlock()
}

// LiveEdges is the live edge count this edge last saw (1 until its first
// heartbeat succeeds).
func (s *Server) LiveEdges() int64 { return s.admit.live.Load() }

// GateShare returns the k and floor of the admission gate this edge admits
// with now: edge.rate.gate_k and gate_floor over the edges sharing them.
func (s *Server) GateShare() (k, floor float64) { return s.admit.gate.Rate() }

// opsPath reports the routes that are never refused by address: health
// checks and scrapes come from the platform, not from buyers. /readyz and
// /metrics are such routes only where the public listener serves them
// (edge.public_ops); otherwise they are ordinary unknown paths.
func (s *Server) opsPath(p []byte) bool {
	switch string(p) {
	case "/healthz":
		return true
	case "/readyz", "/metrics":
		return s.cfg.PublicOps
	}
	return false
}

// addr runs the address checks; false means it has answered.
func (a *admission) addr(ctx *fasthttp.RequestCtx) bool {
	ip := a.clientIP(ctx)
	if !ip.IsValid() {
		return true
	}
	if a.block.set().IP(ip) {
		a.out.write(ctx, ansBlockedIP)
		return false
	}
	lim := a.lim.Load()
	if lim.ip == nil || lim.exempted(ip) {
		return true
	}
	if ok, wait := lim.ip.Allow(ipKey(ip)); !ok {
		a.out.retry(ctx, ansRateIP, wait)
		return false
	}
	return true
}

func (l *limits) exempted(a netip.Addr) bool {
	for _, p := range l.exempt {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// user reads X-User-Id and runs the user checks (the identity check of
// edge.identity: presence, form, a single header, trusted peer or
// signature; then the blocklist); ok false means it has answered.
func (a *admission) user(ctx *fasthttp.RequestCtx) (user int64, ok bool) {
	user, r := a.ident.User(ctx)
	switch {
	case r != identity.OK:
		a.out.write(ctx, identityAnswers[r])
		return 0, false
	case a.block.set().User(user):
		a.out.write(ctx, ansBlockedUser)
		return 0, false
	}
	return user, true
}

// userRate runs the per-user limit. It comes after the checks that answer
// from local state alone (window, sold-out flag): a crowd on a sold-out SKU
// is turned away without each new buyer taking a limiter entry. ok false
// means it has answered.
func (a *admission) userRate(ctx *fasthttp.RequestCtx, user int64) bool {
	if ok, wait := a.lim.Load().user.Allow(uint64(user)); !ok {
		a.out.retry(ctx, ansRateUser, wait)
		return false
	}
	return true
}

// purchase runs the shared limits of one purchase attempt: a place among
// the SKU's attempts in flight, then the admission gate, which a holder (a
// buyer the engine said holds a ticket for sku) passes without spending:
// the gate's capacity is for buyers who can still buy. ok false means it
// has answered (and holds nothing); ok true means the attempt holds a place
// of sku, which the caller must give back (done) once the engine has
// answered or the attempt ends.
func (a *admission) purchase(ctx *fasthttp.RequestCtx, sku int64, holder bool) bool {
	// A backlog of orders refuses before anything is held: the attempt
	// would only add to it.
	if b := a.backlog; b != nil {
		if ok, wait := b.allow(); !ok {
			a.out.retry(ctx, ansBacklog, wait)
			return false
		}
	}
	// First: under overload attempts wait here, parked at no cost, for a
	// place (edge.rate.sku_inflight_wait), and the bound caps the engine's
	// queue for the SKU. Retry-After is the least, one second: a place
	// frees as soon as any attempt inside is answered.
	if !a.inflight.AcquireWait(sku) {
		a.out.retry(ctx, ansInflight, 0)
		return false
	}
	if holder {
		return true
	}
	if ok, wait := a.gate.Allow(sku); !ok {
		a.inflight.Release(sku)
		a.out.retry(ctx, ansGate, wait)
		return false
	}
	return true
}

// done gives back the place in flight a purchase took.
func (a *admission) done(sku int64) { a.inflight.Release(sku) }

// observe tells the admission gate the SKU's remaining stock (-1: unknown).
func (a *admission) observe(sku, remaining int64) { a.gate.Observe(sku, remaining) }
