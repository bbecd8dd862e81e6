-- release_batch: give the stock of n tickets of one SKU back (compensation),
-- idempotently, n >= 1. This is the one definition of the release rule (one
-- ticket is a batch of one). Tickets are judged in order, each as if
-- released alone after the ones before it: a ticket given twice is
-- released once, and the second answers NOT_HELD.
-- KEYS[1] stock   integer: remaining units
-- KEYS[2] users   hash: userId -> requestNo
-- KEYS[3] sold    integer: units occupied or ordered
-- KEYS[4] claimed set: requestNos the consumer claimed for an order
-- KEYS[5] closed  hash: userId -> requestNo of the buyer's order closed unpaid
-- KEYS[6] qty     hash: requestNo -> units (SKUs of several units per ticket)
-- KEYS[7] pending sorted set: "userId:requestNo" -> accept ms (unclaimed)
-- ARGV[1] "1" to release claimed tickets too (the order failed for good or
--         was closed unpaid); anything else leaves a claimed ticket alone
-- ARGV[2] "1" when the tickets' orders were closed unpaid: closed[userId] =
--         requestNo is written for every ticket whatever its outcome
--         (idempotent, so a retried close leaves the same fact), for occupy
--         to refuse the buyer where the activity forbids buying again after
--         a close
-- ARGV    then n triples, ticket i = 1..n:
--   ARGV[3i]   userId
--   ARGV[3i+1] requestNo
--   ARGV[3i+2] quantity as the message says: an integer >= 1 (else an error
--              reply, nothing changed); never trusted for the units: a
--              ticket without a qty entry took one unit (occupy records
--              every ticket of a SKU of limit > 1, and one of limit 1 takes
--              at most one), so a forged quantity restores nothing extra
-- Returns n codes, ticket i's at i:
--   "RELEASED"  stock restored by the units the occupancy recorded (qty's,
--               else 1), user record and units entry removed
--   "NOT_HELD"  the user's record does not name this requestNo (released
--               already, or never occupied): nothing changed
--   "CLAIMED"   the ticket was claimed for an order and ARGV[1] is not "1":
--               nothing changed
-- Whatever the outcome a ticket is not pending afterwards: released, it
-- holds nothing; not held or claimed, it does not belong in the index.
-- Stock is restored only through the user's record, never by a bare INCR.
-- Redis work per call, whatever n is: one ZREM and one HMGET; where a
-- ticket is held one SMISMEMBER; where one is released one HMGET and one
-- HDEL of qty, one HDEL of users, one DECRBY and one INCRBY (and one SREM
-- where a claimed one is released by force); one HSET of closed for a close.
local n = (#ARGV - 2) / 3
for i = 1, n do
  local q = tonumber(ARGV[3 * i + 2])
  if not q or q < 1 or q ~= math.floor(q) then
    return redis.error_reply('ERR release: quantity must be an integer >= 1')
  end
end
local force, closing = ARGV[1] == '1', ARGV[2] == '1'
local uids, rns, pend, closed = {}, {}, {}, {}
for i = 1, n do
  uids[i] = ARGV[3 * i]
  rns[i] = ARGV[3 * i + 1]
  pend[i] = uids[i] .. ':' .. rns[i]
  if closing then
    closed[2 * i - 1], closed[2 * i] = uids[i], rns[i]
  end
end
if closing then
  redis.call('HSET', KEYS[5], unpack(closed))
end
redis.call('ZREM', KEYS[7], unpack(pend))
local holders = redis.call('HMGET', KEYS[2], unpack(uids))
-- held: the tickets whose record names them, before any of this call's
-- releases; gone: users released earlier in this call.
local held = {}
for i = 1, n do
  if holders[i] == rns[i] then
    held[#held + 1] = i
  end
end
local out = {}
for i = 1, n do
  out[i] = 'NOT_HELD'
end
if #held == 0 then
  return out
end
local hrns = {}
for j, i in ipairs(held) do
  hrns[j] = rns[i]
end
local isClaimed = redis.call('SMISMEMBER', KEYS[4], unpack(hrns))
local gone, rel, unclaim, relUids, relRns = {}, {}, {}, {}, {}
for j, i in ipairs(held) do
  local u = uids[i]
  if gone[u] then
    -- released earlier in this call: the record is gone
  elseif isClaimed[j] == 1 and not force then
    out[i] = 'CLAIMED'
  else
    out[i] = 'RELEASED'
    gone[u] = true
    rel[#rel + 1] = i
    relUids[#relUids + 1] = u
    relRns[#relRns + 1] = rns[i]
    if isClaimed[j] == 1 then
      unclaim[#unclaim + 1] = rns[i]
    end
  end
end
if #rel == 0 then
  return out
end
if #unclaim > 0 then
  redis.call('SREM', KEYS[4], unpack(unclaim))
end
local units = redis.call('HMGET', KEYS[6], unpack(relRns))
local total = 0
for j in ipairs(rel) do
  total = total + tonumber(units[j] or '1')
end
redis.call('HDEL', KEYS[6], unpack(relRns))
redis.call('HDEL', KEYS[2], unpack(relUids))
redis.call('DECRBY', KEYS[3], total)
redis.call('INCRBY', KEYS[1], total)
return out
