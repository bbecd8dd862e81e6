-- occupy_batch: take stock for n buyers of one SKU in one call, n >= 1 (DESIGN
-- §5). This is the one definition of the occupy rules: a single buyer is a
-- batch of one, and the engine's group commit sends the buyers that queued
-- for a SKU together. Buyers are judged one after another in ARGV order, so
-- each gets the answer it would get alone in that order: a buyer repeated in
-- the batch is DUPLICATE naming the requestNo the earlier one took, a buyer
-- whose quantity no longer fits is SOLD_OUT while a smaller one after it may
-- still be OK. The call is all the Redis work an accepted buyer costs: it
-- also counts the buyer's attempt in the user x SKU window (a key in the
-- SKU's slot), but does not store the attempt that takes a ticket. It
-- writes no result: an accepted buyer's QUEUING is its
-- record in KEYS[3], which the results store reads with the ticket's field
-- (stock/results), until the consumer or a compensation writes the end.
-- KEYS[1] meta    hash: status, start_ms, end_ms, limit, soldout ("1": on-call
--                 marked the SKU sold out whatever its stock), rebuy ("0": a
--                 buyer whose order was closed unpaid may not buy again)
-- KEYS[2] stock   integer: remaining units
-- KEYS[3] users   hash: userId -> requestNo
-- KEYS[4] sold    integer: units occupied or ordered
-- KEYS[5] closed  hash: userId -> requestNo of the buyer's order closed unpaid
-- KEYS[6] qty     hash: requestNo -> units, for every record of a SKU that
--                 sells more than one unit per ticket (meta limit > 1)
-- KEYS[7] pending sorted set, the orphan sweeper's journal: one entry per
--                 call that took stock, member "userId:requestNo" of each
--                 ticket it took, joined by ",", score the accept time
--                 (server ms). Claims and releases leave it alone: the
--                 sweeper drops an entry once none of its tickets is held
--                 unclaimed (pending_page.lua)
-- KEYS[8] the user x SKU window's hash, only where the window is on (ARGV[3]
--         > 0): sk:{a<A>:s<S>}:rl:<bucket>, bucket = the caller's unix ms /
--         the window's ms; userId -> attempts in this window that took no
--         ticket. The attempt that takes one is not stored: the buyer's
--         record answers each later attempt DUPLICATE, and the release
--         that gives the ticket back counts it then (release_batch.lua). One
--         hash per SKU and window, with one expiry (the window's end),
--         instead of a counter key per buyer
-- ARGV[1] activity id, ARGV[2] sku id (named by every requestNo too)
-- ARGV[3] attempts allowed per user x SKU and window (edge.rate.user_sku_limit;
--         0: no window, no KEYS[8], no counter touched)
-- ARGV[4] the end of KEYS[8]'s window, unix ms by the caller's clock:
--         (bucket + 1) x the window (edge.rate.user_sku_window)
-- ARGV[4+3i-2] userId, ARGV[4+3i-1] requestNo, ARGV[4+3i] quantity of buyer i
--              (quantity a positive integer; anything else is OVER_LIMIT —
--              outside 1..limit — and takes nothing)
-- Returns a flat array of 3n values, {code, remaining, holder} of buyer i at
-- 3i-2, 3i-1, 3i (one buyer: {code, remaining, holder}):
--   "OK"           stock taken, the record written; remaining after this
--                  buyer's decrement; holder = its requestNo
--   "RATE_LIMITED" the buyer's attempts in the window are over the limit
--                  (counted first, before any other rule, whatever the sale's
--                  state; within one call every attempt counts as it comes,
--                  and the one that took a ticket is taken off the stored
--                  count at the end); holder = milliseconds until the window
--                  ends (by Redis' clock, at least 1)
--   "MISSING"      no meta hash: Redis lost the SKU (restart without
--                  persistence, FLUSHALL) and the watcher has not rebuilt it
--                  from the database yet, or it is not preheated yet. Not a
--                  business answer: the engine answers busy (fail closed)
--   "NOT_OPEN"     status not ONLINE, or server time before start_ms
--   "ENDED"        server time at or after end_ms
--   "DUPLICATE"    the user holds a ticket (before or earlier in the batch);
--                  holder = that requestNo. Also where meta rebuy is "0" and
--                  the user's order was closed unpaid: holder = its requestNo
--   "OVER_LIMIT"   quantity above the per-user limit, or not an integer >= 1
--   "SOLD_OUT"     remaining below quantity (remaining may be above 0), or the
--                  on-call sold-out mark is set (remaining 0: nothing sellable)
-- remaining is -1 where stock was not read.
-- Redis work per call, whatever n is: one TIME, one HMGET of meta, one HMGET
-- of users (and one of closed where rebuy is "0"); where anyone may buy, one
-- GET; where anyone bought, one DECRBY, one INCRBY, one HSET of the new
-- records, one ZADD of their one pending entry (and one HSET of their units
-- where limit > 1); where the window is on, one HMGET of its hash, and
-- where any buyer took no ticket, one HSET and one PEXPIRE of it. One new
-- buyer who buys runs 9 commands inside the call (TIME, HMGET x3, GET,
-- DECRBY, INCRBY, HSET, ZADD); 8 without the window; a batch of n new
-- buyers who all buy, 9 as well.
local n = (#ARGV - 4) / 3
local out = {}
local base = 4
local uids = {}
for i = 1, n do
  uids[i] = ARGV[base + 3 * i - 2]
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[3])
local limited = {} -- i -> true: over the window's limit, judged no further
local open = n     -- buyers not rate-limited
local count = {}   -- userId -> attempts in the window, this call's included
local before = {}  -- userId -> attempts stored before this call
local order = {}   -- userIds in first-seen order, for one HSET
local took = {}    -- userId -> true: took a ticket in this call
local reset = 1    -- ms until the window ends, by Redis' clock (at least 1)
-- flush stores the window's counts, less the attempt that took a ticket
-- (see KEYS[8]). A call whose every buyer took a ticket writes nothing.
local function flush()
  if window <= 0 then
    return
  end
  local counts = {}
  for _, uid in ipairs(order) do
    local c = count[uid]
    if took[uid] then
      c = c - 1
    end
    if c ~= before[uid] then
      counts[#counts + 1] = uid
      counts[#counts + 1] = c
    end
  end
  if #counts > 0 then
    redis.call('HSET', KEYS[8], unpack(counts))
    -- Every write sets the expiry, so the hash never outlives its window
    -- without one; the second of grace keeps an engine whose clock runs a
    -- little behind counting into a hash that still exists.
    redis.call('PEXPIRE', KEYS[8], reset + 1000)
  end
end
if window > 0 then
  reset = math.max(tonumber(ARGV[4]) - now, 1)
  local stored = redis.call('HMGET', KEYS[8], unpack(uids))
  for i = 1, n do
    local uid = uids[i]
    local c = count[uid]
    if not c then
      c = tonumber(stored[i]) or 0
      before[uid] = c
      order[#order + 1] = uid
    end
    c = c + 1
    count[uid] = c
    if c > window then
      out[3 * i - 2], out[3 * i - 1], out[3 * i] = 'RATE_LIMITED', -1, reset
      limited[i] = true
      open = open - 1
    end
  end
  if open == 0 then
    flush()
    return out
  end
end
local function all(code)
  for i = 1, n do
    if not limited[i] then
      out[3 * i - 2], out[3 * i - 1], out[3 * i] = code, -1, ''
    end
  end
  flush()
  return out
end
local meta = redis.call('HMGET', KEYS[1], 'status', 'start_ms', 'end_ms', 'limit', 'soldout', 'rebuy')
if not meta[1] then
  return all('MISSING')
end
if meta[1] ~= 'ONLINE' then
  return all('NOT_OPEN')
end
if now < tonumber(meta[2]) then
  return all('NOT_OPEN')
end
if now >= tonumber(meta[3]) then
  return all('ENDED')
end
local held = redis.call('HMGET', KEYS[3], unpack(uids))
if meta[6] == '0' then
  -- A buyer whose order was closed unpaid holds that ticket for good.
  local closed = redis.call('HMGET', KEYS[5], unpack(uids))
  for i = 1, n do
    held[i] = held[i] or closed[i]
  end
end
local limit = tonumber(meta[4] or '1')
local marked = meta[5] == '1'
local stock -- read on first need
-- The pending entry's score, as a string: Redis would format a Lua number
-- argument with snprintf("%.17g").
local score = string.format('%d', now)
local taken = 0
local seen = {}  -- userId -> requestNo taken earlier in this batch
local set = {}   -- field, value pairs for one HSET of users
local pend = {}  -- "userId:requestNo" of each ticket taken: the pending entry
local units = {} -- requestNo, quantity pairs for the qty HSET (limit > 1)
for i = 1, n do
  if not limited[i] then
    local uid, rn, q = uids[i], ARGV[base + 3 * i - 1], tonumber(ARGV[base + 3 * i])
    local h = seen[uid] or held[i]
    local j = 3 * i - 2
    if h then
      out[j], out[j + 1], out[j + 2] = 'DUPLICATE', -1, h
    elseif not q or q < 1 or q ~= math.floor(q) or q > limit then
      out[j], out[j + 1], out[j + 2] = 'OVER_LIMIT', -1, ''
    elseif marked then
      out[j], out[j + 1], out[j + 2] = 'SOLD_OUT', 0, ''
    else
      if not stock then
        stock = tonumber(redis.call('GET', KEYS[2]) or '0')
      end
      if stock < q then
        out[j], out[j + 1], out[j + 2] = 'SOLD_OUT', stock, ''
      else
        stock = stock - q
        taken = taken + q
        seen[uid] = rn
        set[#set + 1] = uid
        set[#set + 1] = rn
        pend[#pend + 1] = uid .. ':' .. rn
        if limit > 1 then
          units[#units + 1] = rn
          units[#units + 1] = q
        end
        took[uid] = true
        out[j], out[j + 1], out[j + 2] = 'OK', stock, rn
      end
    end
  end
end
if #set > 0 then
  redis.call('DECRBY', KEYS[2], taken)
  redis.call('INCRBY', KEYS[4], taken)
  redis.call('HSET', KEYS[3], unpack(set))
  redis.call('ZADD', KEYS[7], score, table.concat(pend, ','))
  if #units > 0 then
    redis.call('HSET', KEYS[6], unpack(units))
  end
end
flush()
return out
