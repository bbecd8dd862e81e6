-- occupy: take stock for one buyer, atomically (DESIGN §5).
-- KEYS[1] meta   hash: status, start_ms, end_ms, limit, soldout ("1": on-call
--                marked the SKU sold out whatever its stock), rebuy ("0": a
--                buyer whose order was closed unpaid may not buy again)
-- KEYS[2] stock  integer: remaining units
-- KEYS[3] users  hash: userId -> requestNo
-- KEYS[4] sold   integer: units occupied or ordered
-- KEYS[5] closed hash: userId -> requestNo of the buyer's order closed unpaid
-- KEYS[6] qty    hash: requestNo -> units, for every record of a SKU that
--                sells more than one unit per ticket (meta limit > 1)
-- ARGV[1] userId
-- ARGV[2] requestNo
-- ARGV[3] quantity (positive integer)
-- Returns {code, remaining, holder}:
--   "OK"         stock taken; remaining after the decrement; holder = ARGV[2]
--   "MISSING"    no meta hash: Redis lost the SKU (restart without
--                persistence, FLUSHALL) and the watcher has not rebuilt it
--                from the database yet, or it is not preheated yet. Not a
--                business answer: the engine answers busy (fail closed)
--   "NOT_OPEN"   status not ONLINE, or server time before start_ms
--   "ENDED"      server time at or after end_ms
--   "DUPLICATE"  the user already holds a ticket; holder = that requestNo.
--                Also where meta rebuy is "0" and the user's order was
--                closed unpaid: holder = the closed order's requestNo
--   "OVER_LIMIT" quantity above the per-user limit
--   "SOLD_OUT"   remaining stock below quantity (remaining may be above 0),
--                or the on-call sold-out mark is set (remaining 0: nothing
--                is sellable)
-- remaining is -1 where stock was not read.
local meta = redis.call('HMGET', KEYS[1], 'status', 'start_ms', 'end_ms', 'limit', 'soldout', 'rebuy')
if not meta[1] then
  return {'MISSING', -1, ''}
end
if meta[1] ~= 'ONLINE' then
  return {'NOT_OPEN', -1, ''}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < tonumber(meta[2]) then
  return {'NOT_OPEN', -1, ''}
end
if now >= tonumber(meta[3]) then
  return {'ENDED', -1, ''}
end
local holder = redis.call('HGET', KEYS[3], ARGV[1])
if not holder and meta[6] == '0' then
  holder = redis.call('HGET', KEYS[5], ARGV[1])
end
if holder then
  return {'DUPLICATE', -1, holder}
end
local q = tonumber(ARGV[3])
if q > tonumber(meta[4] or '1') then
  return {'OVER_LIMIT', -1, ''}
end
if meta[5] == '1' then
  return {'SOLD_OUT', 0, ''}
end
local stock = tonumber(redis.call('GET', KEYS[2]) or '0')
if stock < q then
  return {'SOLD_OUT', stock, ''}
end
stock = redis.call('DECRBY', KEYS[2], q)
redis.call('INCRBY', KEYS[4], q)
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
if tonumber(meta[4] or '1') > 1 then
  redis.call('HSET', KEYS[6], ARGV[2], q)
end
return {'OK', stock, ARGV[2]}
