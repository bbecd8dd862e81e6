// Package edge is the public HTTP endpoint of a sale (fasthttp): it rejects,
// cheapest check first and OpenResty-style, every purchase that cannot
// succeed — bad input, no identity, unknown SKU, window closed, locally
// flagged sold out, missing token — and hands the rest to the engine,
// answering with a queue ticket. It also serves ticket results, the public
// activity view, qualification tokens, health, readiness and metrics.
//
// Server wires small parts, each in a file named for it: admission
// (admit.go, with clientip.go, blocklist.go and the rate reload in
// reload.go), the catalog views (views.go), the sold-out flags (soldout.go),
// the answers (answers.go: the one table of what a buyer is told), the
// token hooks (token.go), the per-SKU purchase counts (skutally.go) and the
// optional risk check (risk.go: a call to a risk service with a per-user
// verdict cache and a per-activity policy for when it fails). The routes are order.go, result.go, activity.go,
// token.go and health.go; events.go and poll.go keep the parts fresh.
//
// Admission comes first: the client address (X-Forwarded-For only from
// edge.trusted_proxies) against the IP blocklist and the per-IP limit, then
// the user against the user blocklist and the per-user limit, and, for a
// purchase that passed every local check, a place among the SKU's attempts
// in flight (edge.rate.sku_inflight) and the per-SKU admission gate, which lets this edge's share
// (1/edge.rate.gate_edges) of K × remaining stock per second through to the
// engine. The user × SKU window (edge.rate.user_sku_*) is counted by the
// engine's occupy script on the SKU's shard; its RATE_LIMITED answer is a
// 429 too. Every refusal for rate is 429 with Retry-After. A purchase
// admitted then meets the risk check when edge.risk.url is set (risk.go),
// before its token is spent and the engine is asked. SetRate (SIGHUP in
// cmd/seckill) changes edge.rate while serving.
//
// Local state is two ristretto caches: per-SKU sold-out flags (raised by one
// function, whatever raised them: the engine's answers, events, the stock
// check; dropped by "available" events; expiring after edge.soldout_ttl as
// the fallback for a missed event) and per-SKU views of the current
// activity built from the catalog. The view a purchase resolves to is handed
// to the engine as is (engine.Request's Activity and SKU): the SKU is
// resolved once, here. Events arrive on the Redis pub/sub channel
// sale.EventsChannel (the subscription re-subscribes by itself) and,
// in-process, through Server.HandleEvent. Sale windows are judged by Redis
// server time (local clock plus an offset sampled from TIME), the clock the
// occupy script uses.
//
// Metrics (registered on the injected registerer, every known label created
// at 0):
//
//	seckill_edge_requests_total{route,status}        answered requests
//	seckill_edge_rejections_total{reason}            refused before the engine
//	seckill_edge_engine_calls_total{outcome}         purchase attempts given to the engine
//	seckill_edge_request_seconds{route}              time to answer (histogram)
//	seckill_edge_soldout_propagation_seconds         event sender to local flag (histogram)
//	seckill_edge_blocklist_entries{kind}             blocklist in force: ip, user
//	seckill_edge_live_edges                          live edges counted at the last heartbeat (the gate's divisor)
//	seckill_edge_heartbeat_errors_total              heartbeats that failed (the last count is kept)
//	seckill_edge_risk_verdicts_total{verdict,source} risk verdicts applied: allow, deny × service, cache
//	seckill_edge_risk_failures_total{kind}           risk calls without a verdict: timeout, error
//	seckill_edge_risk_degraded_total{policy}         purchases the policy decided: allow (passed), deny (503)
//	seckill_edge_risk_call_seconds                   one risk call (histogram)
//	seckill_edge_risk_breaker_state                  the breaker around the risk service: 0 closed, 1 half-open, 2 open
//	seckill_edge_risk_unchecked_total                purchases that got a ticket by the local rules, recorded for the re-check
//	seckill_edge_risk_rechecks_total{outcome}        re-checks: allow, deny, failed, unrecorded
//	seckill_edge_sku_purchases_total{activity,sku,outcome} purchases of a catalog SKU: accepted (200), rejected (any other answer)
//
// The per-SKU series (skutally.go) are two per (activity, SKU) of the
// catalog, created at 0 with each catalog load and dropped for a SKU that
// left it: their cardinality is the catalog's, never the traffic's.
//
// Routes: order, submit, result, activity, token, healthz, readyz, metrics,
// none (no route matched), guard (refused by address before routing).
// Rejection reasons: route, too_large, bad_http, no_user, bad_user,
// bad_request, unknown_sku, not_open, ended, sold_out, token_required,
// token_invalid, busy, blocked_ip, blocked_user, rate_ip, rate_user,
// rate_user_sku, gate, inflight, not_reserved, token_not_offered, risk, doubled_user,
// untrusted_user, bad_user_sig, media_type, reserved_only, paused, route_closed,
// risk_local. Engine outcomes:
// queued, not_open, ended, sold_out, duplicate, over_limit, rate_limited,
// unknown_sku, busy.
package edge
