-- transfer_credit: the second step of a transfer (transfer_debit.lua): add
-- the units a debit recorded to the destination bucket, once per id.
--
-- KEYS[1] stock   integer: the destination bucket's remaining units
-- KEYS[2] xfer    hash: the destination bucket's transfer record
--                 "c:<id>"  "<units>|<server ms>": what this transfer credited
--                           and when (transfer_trim.lua drops it once old)
--                 "in"      units ever credited
--                 "from:<b>" units ever credited from bucket b (the mirror of
--                           b's "to:<this bucket>")
-- KEYS[3] meta    hash: the destination bucket's meta; without it Redis lost
--                 the bucket (a restart without persistence): nothing is
--                 credited and the transfer stays in flight on its source
--                 until the bucket is rebuilt, so no unit lands on a bucket
--                 whose books are gone
-- ARGV[1] id      the transfer's id
-- ARGV[2] units   the units the debit recorded (>= 1)
-- ARGV[3] src     the source bucket's number
--
-- Returns 1 when it credited, 0 when the id was credited before (a retry);
-- an error reply "MISSING" when the bucket's meta is gone.
if redis.call('EXISTS', KEYS[3]) == 0 then
  return redis.error_reply('MISSING transfer_credit: the bucket has no meta')
end
if redis.call('HEXISTS', KEYS[2], 'c:' .. ARGV[1]) == 1 then
  return 0
end
local n = tonumber(ARGV[2])
if not n or n < 1 then
  return redis.error_reply('transfer_credit: units must be at least 1')
end
local now = redis.call('TIME')
redis.call('HSET', KEYS[2], 'c:' .. ARGV[1], n .. '|' .. (now[1] * 1000 + math.floor(now[2] / 1000)))
redis.call('INCRBY', KEYS[1], n)
redis.call('HINCRBY', KEYS[2], 'in', n)
redis.call('HINCRBY', KEYS[2], 'from:' .. ARGV[3], n)
return 1
