// Package edge is the public HTTP endpoint of a sale (fasthttp): it rejects,
// cheapest check first and OpenResty-style, every purchase that cannot
// succeed — bad input, no identity, unknown SKU, window closed, locally
// flagged sold out, missing token — and hands the rest to the engine,
// answering with a queue ticket. It also serves ticket results, the public
// activity view, health, readiness and metrics.
//
// Local state is two ristretto caches: per-SKU sold-out flags (raised by the
// engine's answers and by events, dropped by "available" events, expiring
// after edge.soldout_ttl as the fallback for a missed event) and per-SKU
// views of the current activity built from the catalog. Events arrive on
// the Redis pub/sub channel sale.EventsChannel (the subscription
// re-subscribes by itself) and, in-process, through Server.HandleEvent.
// Sale windows are judged by Redis server time (local clock plus an offset
// sampled from TIME), the clock the occupy script uses.
//
// Metrics (registered on the injected registerer, every known label created
// at 0):
//
//	seckill_edge_requests_total{route,status}        answered requests
//	seckill_edge_rejections_total{reason}            refused before the engine
//	seckill_edge_engine_calls_total{outcome}         purchase attempts given to the engine
//	seckill_edge_request_seconds{route}              time to answer (histogram)
//	seckill_edge_soldout_propagation_seconds         event sender to local flag (histogram)
//
// Rejection reasons: route, too_large, bad_http, no_user, bad_user,
// bad_request, unknown_sku, not_open, ended, sold_out, token_required,
// token_invalid, busy. Engine outcomes: queued, not_open, ended, sold_out,
// duplicate, over_limit, unknown_sku, busy.
package edge
