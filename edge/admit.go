package edge

import (
	"context"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/redis/rueidis"
	"github.com/valyala/fasthttp"

	"seckill/internal/ratelimit"
)

// Admission: who may come in and how often, in the order the checks run,
// cheapest first (edge.rate, edge.blocklist):
//
//  1. before routing, every request but /healthz, /readyz and /metrics:
//     the client address (clientip.go) against the IP blocklist (403), then
//     the per-IP limit unless the address is exempt (429);
//  2. purchase and token requests: X-User-Id (401/400), the user blocklist
//     (403), the per-user limit (429);
//  3. purchases that passed every local check (body, window, sold-out flag,
//     token signature): a place among the SKU's attempts in flight
//     (edge.rate.sku_inflight; 429), held until the engine has answered,
//     then the user × SKU window in Redis (429; Redis down: 503) and the
//     per-SKU admission gate (429).
//
// Every 429 carries Retry-After in whole seconds, at least 1. Nothing here
// allocates on the hot path.

// limits are the rate-limit layers built from edge.rate, immutable once
// published: a reload (SetRate) builds new ones and swaps the pointer, so a
// request reads its limits with one atomic load and no lock. The gate and
// the in-flight bound are not here: they keep their state across reloads
// and take their new settings in place (Server.gate, Server.inflight).
type limits struct {
	cfg    RateConfig // what they were built from
	ip     *ratelimit.Local
	exempt []netip.Prefix
	user   *ratelimit.Local
	window *ratelimit.Window
}

// newLimits builds the layers; a disabled layer is nil (its Allow passes).
// An in-process layer whose settings are those of old is carried over with
// its state (old may be nil): a reload that changes only the gate does not
// hand every client a fresh burst.
func newLimits(c RateConfig, rdb rueidis.Client, old *limits) *limits {
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
	if c.UserSKULimit > 0 {
		// Its state is in Redis: nothing to carry over.
		l.window = ratelimit.NewWindow(rdb, c.UserSKULimit, c.UserSKUWindow)
	}
	return l
}

// gateShare is this edge's share of the admission gate: gate_k and
// gate_floor divided among gate_edges edges.
func (c *RateConfig) gateShare() (k, floor float64) {
	n := float64(max(c.GateEdges, 1))
	return c.GateK / n, c.GateFloor / n
}

var headerRetryAfter = []byte("Retry-After")

// opsPath reports the routes that are never refused by address: health
// checks and scrapes come from the platform, not from buyers.
func opsPath(p []byte) bool {
	switch string(p) {
	case "/healthz", "/readyz", "/metrics":
		return true
	}
	return false
}

// admitAddr runs the address checks; false means it has answered.
func (s *Server) admitAddr(ctx *fasthttp.RequestCtx) bool {
	a := s.clientIP(ctx)
	if !a.IsValid() {
		return true
	}
	if s.blocked().IP(a) {
		s.write(ctx, ansBlockedIP)
		return false
	}
	lim := s.lim.Load()
	if lim.ip == nil || lim.exempted(a) {
		return true
	}
	if ok, wait := lim.ip.Allow(ipKey(a)); !ok {
		s.writeRetry(ctx, ansRateIP, wait)
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

// admitUser reads X-User-Id and runs the user checks (presence, form,
// blocklist); ok false means it has answered.
func (s *Server) admitUser(ctx *fasthttp.RequestCtx) (user int64, ok bool) {
	user, present, valid := userID(ctx.Request.Header.Peek("X-User-Id"))
	switch {
	case !present:
		s.write(ctx, ansNoUser)
		return 0, false
	case !valid:
		s.write(ctx, ansBadUser)
		return 0, false
	case s.blocked().User(user):
		s.write(ctx, ansBlockedUser)
		return 0, false
	}
	return user, true
}

// admitUserRate runs the per-user limit. It comes after the checks that
// answer from local state alone (window, sold-out flag): a crowd on a
// sold-out SKU is turned away without each new buyer taking a limiter
// entry. ok false means it has answered.
func (s *Server) admitUserRate(ctx *fasthttp.RequestCtx, user int64) bool {
	if ok, wait := s.lim.Load().user.Allow(uint64(user)); !ok {
		s.writeRetry(ctx, ansRateUser, wait)
		return false
	}
	return true
}

// admitPurchase runs the shared limits of one purchase attempt: a place
// among the SKU's attempts in flight, the user × SKU window in Redis, then
// the admission gate. ok false means it has answered (and holds nothing);
// ok true means the attempt holds a place of sku in s.inflight, which the
// caller must give back (Release) once the engine has answered or the
// attempt ends.
func (s *Server) admitPurchase(ctx *fasthttp.RequestCtx, activity, sku, user int64) bool {
	// First, before any Redis call: under overload attempts wait here,
	// parked at no cost, for a place (edge.rate.sku_inflight_wait), and the
	// bound caps the window's Redis calls for the SKU as well as the
	// engine's queue. Retry-After is the least, one second: a place frees
	// as soon as any attempt inside is answered.
	if !s.inflight.AcquireWait(sku) {
		s.writeRetry(ctx, ansInflight, 0)
		return false
	}
	if !s.admitShared(ctx, activity, sku, user) {
		s.inflight.Release(sku)
		return false
	}
	return true
}

// admitShared runs the user × SKU window in Redis, then the admission
// gate; false means it has answered.
func (s *Server) admitShared(ctx *fasthttp.RequestCtx, activity, sku, user int64) bool {
	if w := s.lim.Load().window; w != nil {
		wctx, cancel := context.WithTimeout(s.bgCtx, s.cfg.RedisTimeout)
		ok, wait, err := w.Allow(wctx, activity, sku, user)
		cancel()
		if err != nil {
			// Fail closed: without the shared count we cannot know.
			s.warnRare("edge user × sku window unavailable; answering busy", err)
			s.write(ctx, ansCheckBusy)
			return false
		}
		if !ok {
			s.writeRetry(ctx, ansRateUserSKU, wait)
			return false
		}
	}
	if ok, wait := s.gate.Allow(sku); !ok {
		s.writeRetry(ctx, ansGate, wait)
		return false
	}
	return true
}

// writeRetry sends a 429 with Retry-After: wait rounded up to whole
// seconds, at least 1 (RFC 9110 has no smaller unit, and "0" invites an
// immediate retry storm). No allocation.
func (s *Server) writeRetry(ctx *fasthttp.RequestCtx, a *answer, wait time.Duration) {
	s.write(ctx, a)
	secs := int64((wait + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	var buf [20]byte
	ctx.Response.Header.SetCanonical(headerRetryAfter, strconv.AppendInt(buf[:0], secs, 10))
}
