-- settle: make a one-unit-per-ticket SKU's sold counter equal the units its
-- user records hold, moving the difference to or from the remaining stock
-- (the reconciler's repair of "redis_records" drift). Units counted as sold
-- that no record holds can never become an order (an order needs a claimed
-- record), so they go back on sale; records that sold does not count take
-- their units out of the remaining stock (never below 0).
-- KEYS[1] meta, KEYS[2] stock, KEYS[3] users, KEYS[4] sold
-- KEYS[5] xfer    only for a bucket of a SKU split into buckets: its
--                 transfer record, whose "in" and "out" are in its books
-- ARGV[1] the sold counter the caller saw (compare-and-set: any change
--         since means the caller's checks are stale)
-- Returns {code, moved}: "SETTLED" with the units moved to remaining
-- (negative: taken from it), "STALE" (sold changed), "NOT_ONE" (the SKU
-- sells more than one unit per ticket: records do not tell units),
-- "LEDGER" (remaining + sold != initial, + in − out for a bucket: not
-- provably safe).
local sold = tonumber(redis.call('GET', KEYS[4]) or '0')
if sold ~= tonumber(ARGV[1]) then
  return {'STALE', 0}
end
if tonumber(redis.call('HGET', KEYS[1], 'limit') or '1') ~= 1 then
  return {'NOT_ONE', 0}
end
local stock = tonumber(redis.call('GET', KEYS[2]) or '0')
local initial = tonumber(redis.call('HGET', KEYS[1], 'initial') or '0')
if KEYS[5] then
  local t = redis.call('HMGET', KEYS[5], 'in', 'out')
  initial = initial + tonumber(t[1] or '0') - tonumber(t[2] or '0')
end
if stock + sold ~= initial then
  return {'LEDGER', 0}
end
local held = redis.call('HLEN', KEYS[3])
local d = sold - held
if d < 0 and stock + d < 0 then
  d = -stock
end
if d ~= 0 then
  redis.call('INCRBY', KEYS[2], d)
  redis.call('DECRBY', KEYS[4], d)
end
return {'SETTLED', d}
