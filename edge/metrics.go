package edge

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Routes, the label values of the per-route series.
const (
	routeOrder    = iota // POST /api/v1/flash-sale/order
	routeSubmit          // POST /api/seckill/submit
	routeResult          // GET …/result/{requestNo}, both paths
	routeActivity        // GET /api/v1/flash-sale/activities/{id}
	routeHealthz
	routeReadyz
	routeMetrics
	routeToken // POST /api/v1/flash-sale/token
	routeNone  // no route matched
	routeGuard // refused by address before routing (IP blocklist, per-IP limit)
	nRoutes
)

var routes = [nRoutes]string{
	routeOrder:    "order",
	routeSubmit:   "submit",
	routeResult:   "result",
	routeActivity: "activity",
	routeHealthz:  "healthz",
	routeReadyz:   "readyz",
	routeMetrics:  "metrics",
	routeToken:    "token",
	routeNone:     "none",
	routeGuard:    "guard",
}

// knownStatuses get series created at start; others are created on first
// use.
var knownStatuses = [...]int{200, 400, 401, 403, 404, 405, 409, 410, 413, 425, 429, 431, 500, 503}

func statusIndex(code int) int {
	for i, c := range knownStatuses {
		if c == code {
			return i
		}
	}
	return -1
}

type metrics struct {
	requestsVec *prometheus.CounterVec
	requests    [nRoutes][len(knownStatuses)]prometheus.Counter
	rejections  [nReasons]prometheus.Counter
	engineCalls [nOutcomes]prometheus.Counter
	seconds     [nRoutes]prometheus.Observer
	propagation prometheus.Histogram
	blockIPs    prometheus.Gauge
	liveEdges   prometheus.Gauge   // fleet.go
	heartbeats  prometheus.Counter // failed heartbeats (fleet.go)
	fleetOver   prometheus.Counter // live edge counts past edge.fleet_max_edges (fleet.go)

	// The backlog backpressure (backlog.go): 0 while it is off.
	backlogSeconds, backlogRate, backlogShedding prometheus.Gauge
	blockUsers                                   prometheus.Gauge

	// The risk check (risk.go): every series exists with risk off too.
	riskVerdicts [nRiskVerdicts][nRiskSources]prometheus.Counter
	riskFailures [nRiskFailures]prometheus.Counter
	riskDegraded [nRiskVerdicts]prometheus.Counter // by the policy that decided
	riskSeconds  prometheus.Observer
	// The fallback (riskfallback.go).
	riskBreaker   prometheus.Gauge   // 0 closed, 1 half-open, 2 open
	riskUnchecked prometheus.Counter // purchases recorded as passed unchecked
	riskRechecks  [nRecheckOutcomes]prometheus.Counter

	// Purchases per SKU (skutally.go): children resolved per SKU, not
	// per request.
	skuPurchases *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requestsVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_edge_requests_total",
			Help: "HTTP requests answered by the edge, by route and status code.",
		}, []string{"route", "status"}),
		propagation: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "seckill_edge_soldout_propagation_seconds",
			Help: "Delay from a sold-out or available event's sender to this edge's flag (sender clock vs local clock).",
			// 0.5ms … 4s, doubling, plus the 100ms bound the
			// SeckillSoldOutPropagationSlow alert counts against.
			Buckets: []float64{.0005, .001, .002, .004, .008, .016, .032, .064, .1, .128, .256, .512, 1.024, 2.048, 4.096},
		}),
	}
	blocklist := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "seckill_edge_blocklist_entries",
		Help: "Entries of the blocklist in force on this edge (configuration and admin API), by kind.",
	}, []string{"kind"})
	m.blockIPs, m.blockUsers = blocklist.WithLabelValues("ip"), blocklist.WithLabelValues("user")
	rejections := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_edge_rejections_total",
		Help: "Requests the edge refused before the engine, by reason.",
	}, []string{"reason"})
	engineCalls := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_edge_engine_calls_total",
		Help: "Purchase attempts passed to the engine, by outcome.",
	}, []string{"outcome"})
	seconds := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "seckill_edge_request_seconds",
		Help: "Time to answer a request at the edge, by route.",
		// Dense around the 80ms p99 target.
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .08, .1, .25, .5, 1, 2.5},
	}, []string{"route"})
	riskVerdicts := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_edge_risk_verdicts_total",
		Help: "Risk verdicts the edge applied, by verdict (allow, deny) and source (service: a call answered; cache: a user's recent verdict reused).",
	}, []string{"verdict", "source"})
	riskFailures := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_edge_risk_failures_total",
		Help: "Risk calls that gave no verdict, by kind: timeout (past edge.risk.timeout) or error (refused, no free connection, bad status or body).",
	}, []string{"kind"})
	riskDegraded := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_edge_risk_degraded_total",
		Help: "Purchases the activity's risk policy decided for lack of a verdict: allow (passed without a check) or deny (answered 503 BUSY).",
	}, []string{"policy"})
	riskSeconds := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "seckill_edge_risk_call_seconds",
		Help:    "Time of one call to the risk service, failures included (they end at edge.risk.timeout).",
		Buckets: []float64{.0005, .001, .002, .004, .008, .012, .016, .02, .025, .032, .05, .1},
	})
	m.riskSeconds = riskSeconds
	m.riskBreaker = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "seckill_edge_risk_breaker_state",
		Help: "The circuit breaker around the risk service: 0 closed (calls made), 1 half-open (probing), 2 open (no calls; the fallback decides).",
	})
	m.riskUnchecked = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "seckill_edge_risk_unchecked_total",
		Help: "Purchases that got a ticket without a risk verdict (passed by the local rules) and were recorded for the re-check.",
	})
	rechecks := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_edge_risk_rechecks_total",
		Help: "Re-checks of unchecked purchases, by outcome: allow, deny (the user is blocked, edge.risk.block_on_recheck_deny), failed (left pending), unrecorded (the record could not be written).",
	}, []string{"outcome"})
	for i := range nRecheckOutcomes {
		m.riskRechecks[i] = rechecks.WithLabelValues(recheckOutcomeNames[i])
	}
	m.skuPurchases = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_edge_sku_purchases_total",
		Help: "Answers to purchases of a SKU the catalog sells, by activity, SKU and outcome: accepted (200 QUEUING) or rejected (any other answer). One pair of series per (activity, SKU) of the catalog; a SKU's series go when it leaves the catalog.",
	}, []string{"activity", "sku", "outcome"})
	m.liveEdges = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "seckill_edge_live_edges",
		Help: "Live edges this edge counted at its last successful heartbeat; the admission gate is split among them (edge.rate.gate_edges 0).",
	})
	m.heartbeats = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "seckill_edge_heartbeat_errors_total",
		Help: "Heartbeats to the live edge set that failed; the edge kept its last live edge count.",
	})
	m.fleetOver = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "seckill_edge_fleet_refused_total",
		Help: "Heartbeats whose live edge count exceeded edge.fleet_max_edges (members forged into sk:edges, or a fleet larger than the bound); the edge kept its last count within the bound.",
	})
	m.backlogSeconds = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "seckill_edge_backlog_seconds",
		Help: "Seconds the consumer group needs to drain its lag at the rate it committed over the last samples, at least as long as the lag has waited with nothing committed; 0 without consumer.lag_high.",
	})
	m.backlogRate = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "seckill_edge_backlog_drain_per_second",
		Help: "Messages per second the consumer group drains when it has a backlog (measured between its commits over the busy spans of the last samples), as this edge measured it; 0 until it was seen busy.",
	})
	m.backlogShedding = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "seckill_edge_backlog_shedding",
		Help: "1 while the consumers' backlog is over consumer.lag_high and this edge admits only a share of their drain rate (429 BACKLOG), 0 otherwise.",
	})
	for _, c := range []prometheus.Collector{m.requestsVec, rejections, engineCalls, seconds, m.propagation, blocklist,
		riskVerdicts, riskFailures, riskDegraded, riskSeconds, m.riskBreaker, m.riskUnchecked, rechecks,
		m.skuPurchases, m.liveEdges, m.heartbeats, m.fleetOver,
		m.backlogSeconds, m.backlogRate, m.backlogShedding} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("edge metrics: %w", err)
		}
	}

	for r := range nRoutes {
		m.seconds[r] = seconds.WithLabelValues(routes[r])
		for i, code := range knownStatuses {
			m.requests[r][i] = m.requestsVec.WithLabelValues(routes[r], statusLabel(code))
		}
	}
	for i := range nReasons {
		m.rejections[i] = rejections.WithLabelValues(reasons[i])
	}
	for i := range nOutcomes {
		m.engineCalls[i] = engineCalls.WithLabelValues(outcomes[i])
	}
	for v := range nRiskVerdicts {
		for src := range nRiskSources {
			m.riskVerdicts[v][src] = riskVerdicts.WithLabelValues(riskVerdictNames[v], riskSourceNames[src])
		}
		m.riskDegraded[v] = riskDegraded.WithLabelValues(riskVerdictNames[v])
	}
	for f := range nRiskFailures {
		m.riskFailures[f] = riskFailures.WithLabelValues(riskFailureNames[f])
	}
	return m, nil
}

// observe records one answered request.
func (m *metrics) observe(route, status int, d time.Duration) {
	if i := statusIndex(status); i >= 0 {
		m.requests[route][i].Inc()
	} else {
		m.requestsVec.WithLabelValues(routes[route], statusLabel(status)).Inc()
	}
	m.seconds[route].Observe(d.Seconds())
}
