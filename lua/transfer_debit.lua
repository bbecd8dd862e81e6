-- transfer_debit: the first step of moving units between two buckets of one
-- SKU (DESIGN §5, "Buckets"): take up to ARGV[2] units from the source
-- bucket and record the debit under the transfer's id, once per id.
--
-- KEYS[1] stock   integer: the source bucket's remaining units
-- KEYS[2] xfer    hash: the source bucket's transfer record
--                 "d:<id>"  "<units>|<server ms>": what this transfer debited
--                           and when (transfer_trim.lua drops it once old)
--                 "f:<id>"  a transfer debited here and not yet credited:
--                           "<destination bucket>:<units>" (in flight)
--                 "out"     units ever debited, "in" units ever credited
--                 "to:<b>"  units ever debited toward bucket b: the mirror of
--                           b's "from:<this bucket>", so a rebuild of a
--                           bucket Redis lost finds its transfers here
-- ARGV[1] id      the transfer's id
-- ARGV[2] want    units asked for (>= 1)
-- ARGV[3] dst     the destination bucket's number
--
-- Returns the units debited: a retry with the same id returns the first
-- answer and debits nothing again; 0 when the source had none.
local done = redis.call('HGET', KEYS[2], 'd:' .. ARGV[1])
if done then
  return tonumber(string.match(done, '^%d+'))
end
local want = tonumber(ARGV[2])
if not want or want < 1 then
  return redis.error_reply('transfer_debit: want must be at least 1')
end
local have = tonumber(redis.call('GET', KEYS[1]) or '0')
local n = math.min(want, math.max(have, 0))
local now = redis.call('TIME')
redis.call('HSET', KEYS[2], 'd:' .. ARGV[1], n .. '|' .. (now[1] * 1000 + math.floor(now[2] / 1000)))
if n > 0 then
  redis.call('DECRBY', KEYS[1], n)
  redis.call('HINCRBY', KEYS[2], 'out', n)
  redis.call('HINCRBY', KEYS[2], 'to:' .. ARGV[3], n)
  redis.call('HSET', KEYS[2], 'f:' .. ARGV[1], ARGV[3] .. ':' .. n)
end
return n
