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
-- KEYS[7] the user x SKU window's hash of the window that holds the
--         caller's now (occupy_batch.lua's KEYS[8]), only where ARGV[3] > 0:
--         each released ticket's attempt is counted in it. The occupy
--         script does not store the attempt that took a ticket (the
--         buyer's record answers every later one DUPLICATE); a ticket given
--         back is counted here, once, so a buyer whose tickets keep being
--         released is RATE_LIMITED past the window's limit
-- ARGV[1] "1" to release claimed tickets too (the order failed for good or
--         was closed unpaid); anything else leaves a claimed ticket alone
-- ARGV[2] "1" when the tickets' orders were closed unpaid: closed[userId] =
--         requestNo is written for every ticket whatever its outcome
--         (idempotent, so a retried close leaves the same fact), for occupy
--         to refuse the buyer where the activity forbids buying again after
--         a close
-- ARGV[3] the end of KEYS[7]'s window, unix ms by the caller's clock ("0":
--         no window, no KEYS[7]; without KEYS[7] nothing is counted)
-- ARGV    then n triples, ticket i = 1..n:
--   ARGV[3i+1] userId
--   ARGV[3i+2] requestNo
--   ARGV[3i+3] quantity as the message says: an integer >= 1 (else an error
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
-- The pending journal is left alone: the orphan sweeper drops an entry once
-- none of its tickets is held unclaimed (pending_page.lua).
-- Stock is restored only through the user's record, never by a bare INCR.
-- Redis work per call, whatever n is: one HMGET; where a
-- ticket is held one SMISMEMBER; where one is released one HMGET and one
-- HDEL of qty, one HDEL of users, one DECRBY and one INCRBY (and one SREM
-- where a claimed one is released by force; where the window is on, one
-- TIME, one HMGET, one HSET and one PEXPIRE of its hash); one HSET of
-- closed for a close.
local n = (#ARGV - 3) / 3
for i = 1, n do
  local q = tonumber(ARGV[3 * i + 3])
  if not q or q < 1 or q ~= math.floor(q) then
    return redis.error_reply('ERR release: quantity must be an integer >= 1')
  end
end
local force, closing = ARGV[1] == '1', ARGV[2] == '1'
local uids, rns, closed = {}, {}, {}
for i = 1, n do
  uids[i] = ARGV[3 * i + 1]
  rns[i] = ARGV[3 * i + 2]
  if closing then
    closed[2 * i - 1], closed[2 * i] = uids[i], rns[i]
  end
end
if closing then
  redis.call('HSET', KEYS[5], unpack(closed))
end
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
local wend = tonumber(ARGV[3]) or 0
if wend > 0 and KEYS[7] then
  -- relUids are distinct: a user's record is released once per call.
  local before = redis.call('HMGET', KEYS[7], unpack(relUids))
  local counts = {}
  for j, u in ipairs(relUids) do
    counts[2 * j - 1], counts[2 * j] = u, (tonumber(before[j]) or 0) + 1
  end
  redis.call('HSET', KEYS[7], unpack(counts))
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  -- The occupy script's expiry: the window's end and a second of grace.
  redis.call('PEXPIRE', KEYS[7], math.max(wend - now, 1) + 1000)
end
return out
