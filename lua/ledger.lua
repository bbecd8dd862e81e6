-- ledger: read one SKU's counters in one atomic step (the reconciler
-- compares them with each other and with the database).
-- KEYS[1] meta     hash (initial)
-- KEYS[2] stock    integer: remaining units
-- KEYS[3] users    hash: userId -> requestNo
-- KEYS[4] sold     integer: units occupied or ordered
-- KEYS[5] claimed  set of claimed requestNos
-- KEYS[6] xfer     hash, only for a bucket of a SKU split into buckets: its
--                  transfer record ("out" units ever debited, "in" ever
--                  credited; transfer_debit.lua)
-- Returns {meta exists (0/1), initial, remaining, sold, user records,
-- claimed}, and {out, in} after them where KEYS[6] is given; a missing
-- counter reads 0.
local out = {
  redis.call('EXISTS', KEYS[1]),
  tonumber(redis.call('HGET', KEYS[1], 'initial') or '0'),
  tonumber(redis.call('GET', KEYS[2]) or '0'),
  tonumber(redis.call('GET', KEYS[4]) or '0'),
  redis.call('HLEN', KEYS[3]),
  redis.call('SCARD', KEYS[5]),
}
if KEYS[6] then
  local t = redis.call('HMGET', KEYS[6], 'out', 'in')
  out[7] = tonumber(t[1] or '0')
  out[8] = tonumber(t[2] or '0')
end
return out
