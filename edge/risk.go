package edge

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/redis/rueidis"
	"github.com/sony/gobreaker/v2"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"seckill/sale"
)

// The risk check (edge.risk): an optional call to a risk service — account,
// device, network, behaviour are its business, not the edge's — that every
// purchase makes once it has passed the edge's own checks (window, sold-out
// flag, per-user limit, token signature) and admission (the SKU's place in
// flight, the gate), and before the token is spent
// and the stock is occupied. Behind the gate, the service is asked at the
// pace stock can sell, not at the pace the crowd knocks; the place in flight
// the purchase holds bounds the calls in flight per SKU.
//
// Wire contract (one call, no retry):
//
//	POST edge.risk.url
//	Content-Type: application/json
//	{"userId":42,"activityId":7,"skuId":1001,"quantity":1,"ip":"203.0.113.7","deviceId":"d-9f2c"}
//
//	200 application/json
//	{"verdict":"allow"}  or  {"verdict":"deny","reason":"velocity"}
//
// ip is the client address as admission judged it (X-Forwarded-For only
// from edge.trusted_proxies; "" when the connection has no IP peer);
// deviceId is the buyer's X-Device-Id header, left out when absent or over
// 128 bytes. The answer's other fields — reason included, which is for the
// service's own audit and never shown to the buyer — are ignored. Anything
// else is a failure: no answer within edge.risk.timeout (connecting
// included) is a timeout; another status, a body that is not a JSON object
// with "verdict" "allow" or "deny", a refused connection or no free one
// (edge.risk.max_conns) is an error.
//
// What each outcome does:
//
//   - allow: the purchase goes on; the verdict is cached for the user for
//     edge.risk.cache_ttl;
//   - deny: 403 RISK_REJECTED (rejection reason "risk"); cached the same;
//   - timeout or error, or the circuit breaker open (edge.risk.breaker:
//     after that many failures in a row no call is made for a while): the
//     activity's policy (sale.Activity.RiskOnError, else
//     edge.risk.on_error) decides — allow degrades to the local rules
//     (riskfallback.go: the blocklists, which admission ran, and a
//     per-device and per-IP velocity rule; refused 403 RISK_REJECTED,
//     reason "risk_local") and records the purchase, once it has a
//     ticket, for an asynchronous re-check; deny answers 503 BUSY
//     (rejection reason "busy"). Failures are never cached: the next
//     purchase asks again (unless the breaker is open).
//
// The ticket's story: a purchase that passed (a verdict, a cached one or a
// degraded pass) and then got a ticket has RISK_PASSED added to that
// ticket's history, at the time of the check and with a remark saying how
// it passed (RiskLog). A purchase refused by the check has no ticket —
// the requestNo is drawn by the engine, which it never reaches — so it
// writes nothing to the request log: it is the 403 or 503 answer and the
// metrics. (Minting a number for each refusal would let a bot the risk
// service refuses write a database row per attempt.)

// RiskLog records, in a ticket's history, that the purchase which got it
// passed the risk check: RiskPassed(requestNo, when the check ran, how it
// passed). Called on the buyer's path after the engine answered QUEUING;
// it must not block (queue and write in the background, like package
// reqlog). Safe for concurrent use.
type RiskLog interface {
	RiskPassed(requestNo string, at time.Time, remark string)
}

// WithRiskLog writes RISK_PASSED steps through l. Without it the risk
// check still runs; the tickets' stories leave it out.
func WithRiskLog(l RiskLog) Option { return func(s *Server) { s.riskLog = l } }

// Risk verdicts (and policies), the label values of
// seckill_edge_risk_verdicts_total{verdict} and
// seckill_edge_risk_degraded_total{policy}.
const (
	riskAllow = iota
	riskDeny
	nRiskVerdicts
)

var riskVerdictNames = [nRiskVerdicts]string{riskAllow: sale.RiskAllow, riskDeny: sale.RiskDeny}

// Where a verdict came from: seckill_edge_risk_verdicts_total{source}.
const (
	riskFromService = iota
	riskFromCache
	nRiskSources
)

var riskSourceNames = [nRiskSources]string{riskFromService: "service", riskFromCache: "cache"}

// Calls without a verdict: seckill_edge_risk_failures_total{kind}; open is
// a call the circuit breaker did not make.
const (
	riskTimeout = iota
	riskError
	riskOpen
	nRiskFailures
)

var riskFailureNames = [nRiskFailures]string{riskTimeout: "timeout", riskError: "error", riskOpen: "open"}

// riskChecked is check's "why" of a purchase that had a verdict.
const riskChecked = -1

// Remarks of RISK_PASSED, by how the purchase passed.
var (
	remarkRiskAllow    = "risk service: allow"
	remarkRiskCached   = "risk service: allow (cached verdict)"
	remarkRiskDegraded = [nRiskFailures]string{
		riskTimeout: "risk service timed out; passed by the local rules, unchecked (re-checked when it is back)",
		riskError:   "risk service failed; passed by the local rules, unchecked (re-checked when it is back)",
		riskOpen:    "risk service breaker open; passed by the local rules, unchecked (re-checked when it is back)",
	}
)

// Limits of the wire.
const (
	maxDeviceIDLen = 128
	maxRiskBody    = 4096 // of the answer
)

var (
	headerDeviceID = []byte("X-Device-Id")
	methodPost     = []byte(fasthttp.MethodPost)
)

// riskCheck calls the risk service. Safe for concurrent use; a call
// allocates nothing once the pools are warm.
type riskCheck struct {
	client  *fasthttp.HostClient
	url     string
	timeout time.Duration
	ttl     time.Duration
	cache   *ristretto.Cache[int64, bool] // user -> allowed; nil without edge.risk.cache_ttl
	onError string                        // edge.risk.on_error
	out     answers
	m       *metrics
	warn    *rareWarner
	fb      fallback // riskfallback.go
}

// parseRiskURL checks edge.risk.url and returns the HostClient's address.
func parseRiskURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
		return nil, fmt.Errorf("edge.risk.url: %q must be an http:// or https:// URL with a host (no user, no fragment)", raw)
	}
	return u, nil
}

// newRiskCheck builds the check of cfg, or nil when edge.risk.url is empty.
func newRiskCheck(cfg RiskConfig, out answers, m *metrics, warn *rareWarner, rdb rueidis.Client, block blockUser, log *zap.Logger) (*riskCheck, error) {
	if cfg.URL == "" {
		return nil, nil
	}
	u, err := parseRiskURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	addr := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		addr = net.JoinHostPort(u.Hostname(), port)
	}
	r := &riskCheck{
		client: &fasthttp.HostClient{
			Addr:                      addr,
			Name:                      "seckill-edge",
			IsTLS:                     u.Scheme == "https",
			MaxConns:                  cfg.MaxConns,
			MaxIdleConnDuration:       30 * time.Second,
			MaxResponseBodySize:       maxRiskBody,
			MaxIdemponentCallAttempts: 1,
			// A POST is never retried by fasthttp; the deadline of each
			// call (DoTimeout) bounds connecting, writing and reading.
			NoDefaultUserAgentHeader: true,
		},
		url: cfg.URL, timeout: cfg.Timeout, ttl: cfg.CacheTTL, onError: cfg.OnError,
		out: out, m: m, warn: warn,
	}
	if cfg.CacheTTL > 0 {
		// Cost 1 per user: up to 1<<20 users' verdicts (a few MB).
		if r.cache, err = ristretto.NewCache(&ristretto.Config[int64, bool]{
			NumCounters: 1 << 22, MaxCost: 1 << 20, BufferItems: 64, IgnoreInternalCost: true,
		}); err != nil {
			return nil, fmt.Errorf("edge risk cache: %w", err)
		}
	}
	r.fb = newFallback(cfg, m, rdb, block, log)
	return r, nil
}

// riskQuery is what one purchase tells the risk service.
type riskQuery struct {
	user, activity, sku, quantity int64
	policy                        string // the activity's RiskOnError ("" : edge.risk.on_error)
}

// check runs the risk check of one purchase. ok false means it has
// answered (403 or 503); ok true means the purchase goes on, remark saying
// how it passed (for RISK_PASSED) and why riskChecked, or, for a purchase
// that passed without a verdict (by the local rules), the failure kind:
// the caller records it for the re-check once it has a ticket.
func (r *riskCheck) check(ctx *fasthttp.RequestCtx, q riskQuery, ip []byte) (remark string, why int, ok bool) {
	if r.cache != nil {
		if allowed, hit := r.cache.Get(q.user); hit {
			if allowed {
				r.m.riskVerdicts[riskAllow][riskFromCache].Inc()
				return remarkRiskCached, riskChecked, true
			}
			r.m.riskVerdicts[riskDeny][riskFromCache].Inc()
			r.out.write(ctx, ansRiskRejected)
			return "", riskChecked, false
		}
	}
	device := ctx.Request.Header.PeekBytes(headerDeviceID)
	verdict, fail, err := r.ask(q, ip, device)
	if err != nil {
		r.m.riskFailures[fail].Inc()
		if fail != riskOpen {
			r.warn.warn("edge risk check failed; the activity's policy decides", err)
		}
		policy := q.policy
		if policy == "" {
			policy = r.onError
		}
		if policy == sale.RiskDeny {
			r.m.riskDegraded[riskDeny].Inc()
			r.out.write(ctx, ansCheckBusy)
			return "", riskChecked, false
		}
		// Degrade to the local rules: the blocklists have run already
		// (admission); the velocity rules run here.
		if !r.fb.local(ip, device) {
			r.out.write(ctx, ansRiskLocal)
			return "", riskChecked, false
		}
		r.m.riskDegraded[riskAllow].Inc()
		return remarkRiskDegraded[fail], fail, true
	}
	r.m.riskVerdicts[verdict][riskFromService].Inc()
	if r.cache != nil {
		r.cache.SetWithTTL(q.user, verdict == riskAllow, 1, r.ttl)
	}
	if verdict == riskDeny {
		r.out.write(ctx, ansRiskRejected)
		return "", riskChecked, false
	}
	return remarkRiskAllow, riskChecked, true
}

// ask calls the service through the circuit breaker: while it is open (or
// half-open with its probes out) no call is made, fail riskOpen.
func (r *riskCheck) ask(q riskQuery, ip, device []byte) (verdict, fail int, err error) {
	verdict, err = r.fb.breaker.Execute(func() (int, error) {
		v, f, err := r.call(q, ip, device)
		fail = f
		return v, err
	})
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return 0, riskOpen, err
	}
	return verdict, fail, err
}

// errRiskAnswer is a risk answer the contract does not allow.
var errRiskAnswer = errors.New("risk service answer is not 200 with a JSON verdict allow or deny")

// call asks the service. err non-nil means no verdict, fail saying why.
func (r *riskCheck) call(q riskQuery, ip, device []byte) (verdict, fail int, err error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(r.url)
	req.Header.SetMethodBytes(methodPost)
	req.Header.SetContentTypeBytes(contentTypeJSON)
	var buf [384]byte
	req.SetBody(appendRiskQuery(buf[:0], q, ip, device))

	start := time.Now()
	err = r.client.DoTimeout(req, resp, r.timeout)
	r.m.riskSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		return 0, riskFailure(err), fmt.Errorf("risk call: %w", err)
	}
	if resp.StatusCode() != fasthttp.StatusOK {
		return 0, riskError, errRiskAnswer
	}
	v, ok := parseRiskVerdict(resp.Body())
	if !ok {
		return 0, riskError, errRiskAnswer
	}
	return v, 0, nil
}

// riskFailure classifies a failed call.
func riskFailure(err error) int {
	var ne net.Error
	if errors.Is(err, fasthttp.ErrTimeout) || errors.Is(err, fasthttp.ErrDialTimeout) || errors.As(err, &ne) && ne.Timeout() {
		return riskTimeout
	}
	return riskError
}

// appendRiskQuery appends the call's JSON body. No allocation.
func appendRiskQuery(dst []byte, q riskQuery, ip, device []byte) []byte {
	dst = append(dst, `{"userId":`...)
	dst = strconv.AppendInt(dst, q.user, 10)
	dst = append(dst, `,"activityId":`...)
	dst = strconv.AppendInt(dst, q.activity, 10)
	dst = append(dst, `,"skuId":`...)
	dst = strconv.AppendInt(dst, q.sku, 10)
	dst = append(dst, `,"quantity":`...)
	dst = strconv.AppendInt(dst, q.quantity, 10)
	dst = append(dst, `,"ip":"`...)
	dst = append(dst, ip...) // an address's text needs no escape
	dst = append(dst, '"')
	if len(device) > 0 && len(device) <= maxDeviceIDLen {
		dst = append(dst, `,"deviceId":`...)
		dst = appendJSONBytes(dst, device)
	}
	return append(dst, '}')
}

// appendJSONBytes is appendJSONString for bytes (a header value). Bytes
// past ASCII are escaped as well: a header is not promised to be UTF-8,
// and an invalid sequence must not reach the service's JSON decoder.
func appendJSONBytes(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20 || c >= 0x7f || c == '<' || c == '>' || c == '&':
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// parseRiskVerdict reads {"verdict":"allow"|"deny",…} with the order
// body's scanner: other fields are skipped (but must be valid JSON), a
// verdict given twice or of another value is not a verdict. b is modified
// (strings unescaped in place). No allocation.
func parseRiskVerdict(b []byte) (verdict int, ok bool) {
	p := scanner{b: b}
	p.ws()
	if !p.eat('{') {
		return 0, false
	}
	seen := false
	p.ws()
	if !p.eat('}') {
		for {
			ks, ke, _, ok := p.str()
			if !ok {
				return 0, false
			}
			p.ws()
			if !p.eat(':') {
				return 0, false
			}
			p.ws()
			if string(b[ks:ke]) == "verdict" {
				if seen {
					return 0, false
				}
				seen = true
				v, err := p.text(16)
				switch {
				case err != nil:
					return 0, false
				case string(v) == sale.RiskAllow:
					verdict = riskAllow
				case string(v) == sale.RiskDeny:
					verdict = riskDeny
				default:
					return 0, false
				}
			} else if !p.skip(0) {
				return 0, false
			}
			p.ws()
			if p.eat(',') {
				p.ws()
				continue
			}
			if p.eat('}') {
				break
			}
			return 0, false
		}
	}
	p.ws()
	return verdict, seen && p.i == len(b)
}

// close releases the cache and the idle connections.
func (r *riskCheck) close() {
	if r == nil {
		return
	}
	if r.cache != nil {
		r.cache.Close()
	}
	r.client.CloseIdleConnections()
}
