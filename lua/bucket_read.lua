-- bucket_read: read one bucket's remaining units and its transfer totals in
-- one atomic step, so a sum over the buckets of a SKU (remaining + units
-- debited − units credited) counts every unit exactly once whatever
-- transfers run between the reads of two buckets (DESIGN §5, "Buckets").
-- KEYS[1] stock   integer: the bucket's remaining units
-- KEYS[2] xfer    hash: the bucket's transfer record (transfer_debit.lua):
--                 "out" units ever debited, "in" units ever credited
-- Returns {stock exists (0/1), remaining, out, in}; a missing counter reads 0.
local t = redis.call('HMGET', KEYS[2], 'out', 'in')
return {
  redis.call('EXISTS', KEYS[1]),
  tonumber(redis.call('GET', KEYS[1]) or '0'),
  tonumber(t[1] or '0'),
  tonumber(t[2] or '0'),
}
