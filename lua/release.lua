-- release: give one ticket's stock back (compensation), idempotently.
-- KEYS[1] stock   integer: remaining units
-- KEYS[2] users   hash: userId -> requestNo
-- KEYS[3] sold    integer: units occupied or ordered
-- KEYS[4] claimed set: requestNos the consumer claimed for an order
-- KEYS[5] closed  hash: userId -> requestNo of the buyer's order closed unpaid
-- KEYS[6] qty     hash: requestNo -> units (SKUs of several units per ticket)
-- KEYS[7] pending sorted set: "userId:requestNo" -> accept ms (unclaimed)
-- ARGV[1] userId
-- ARGV[2] requestNo
-- ARGV[3] quantity, used where qty does not record the ticket's units; it
--         must be an integer >= 1 (else an error reply, nothing changed)
-- ARGV[4] "1" to release a claimed ticket too (the order failed for good or
--         was closed unpaid); anything else leaves a claimed ticket alone
-- ARGV[5] "1" when the ticket's order was closed unpaid: closed[userId] =
--         requestNo is written whatever the outcome (idempotent, so a
--         retried close leaves the same fact), for occupy to refuse the
--         buyer where the activity forbids buying again after a close
-- Returns {code, remaining}:
--   "RELEASED"  stock restored by the ticket's units (qty's, else ARGV[3]),
--               user record and units entry removed
--   "NOT_HELD"  the user's record does not name this requestNo (released
--               already, or never occupied): nothing changed
--   "CLAIMED"   the ticket was claimed for an order and ARGV[4] is not "1":
--               nothing changed
-- Whatever the outcome the ticket is not pending afterwards: released, it
-- holds nothing; not held or claimed, it does not belong in the index.
-- Stock is restored only through the user's record, never by a bare INCR.
local argq = tonumber(ARGV[3])
if not argq or argq < 1 or argq ~= math.floor(argq) then
  return redis.error_reply('ERR release: quantity must be an integer >= 1')
end
if ARGV[5] == '1' then
  redis.call('HSET', KEYS[5], ARGV[1], ARGV[2])
end
redis.call('ZREM', KEYS[7], ARGV[1] .. ':' .. ARGV[2])
local holder = redis.call('HGET', KEYS[2], ARGV[1])
if holder ~= ARGV[2] then
  return {'NOT_HELD', tonumber(redis.call('GET', KEYS[1]) or '0')}
end
if redis.call('SISMEMBER', KEYS[4], ARGV[2]) == 1 then
  if ARGV[4] ~= '1' then
    return {'CLAIMED', tonumber(redis.call('GET', KEYS[1]) or '0')}
  end
  redis.call('SREM', KEYS[4], ARGV[2])
end
local q = tonumber(redis.call('HGET', KEYS[6], ARGV[2])) or argq
redis.call('HDEL', KEYS[6], ARGV[2])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('DECRBY', KEYS[3], q)
return {'RELEASED', redis.call('INCRBY', KEYS[1], q)}
