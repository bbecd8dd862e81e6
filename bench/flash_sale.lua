-- flash_sale.lua — the seed's wrk script, kept exactly as the seed wrote it.
-- NOTE: the X-User-Id below is drawn ONCE per thread, when wrk loads the
-- script, and every request of that thread reuses it: against the real
-- system each thread buys at most one order and every other request is a
-- 409 DUPLICATE. Worse, every thread's generator starts from the same seed,
-- so all threads draw the same id: one order for the whole run.
-- Use flash_sale_unique.lua for a crowd of distinct buyers.
wrk.method = "POST"
wrk.body = '{"skuId":1001,"quantity":1}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-User-Id"] = tostring(math.random(1, 1000000))
