-- pending_page: one page of the pending journal for the orphan sweeper: the
-- tickets of its entries accepted before a time that are still held and not
-- claimed, in one atomic step. Occupy adds one entry per call that took
-- stock (occupy_batch.lua's KEYS[7]); claims and releases leave it alone.
-- So this is where an entry leaves: an entry none of whose tickets is held
-- unclaimed any more (each claimed for an order or released) is removed. An
-- entry with one such ticket stays whole, its other tickets judged again
-- on each page that reads it.
-- KEYS[1] users    hash: userId -> requestNo
-- KEYS[2] claimed  set of claimed requestNos
-- KEYS[3] pending  sorted set, the journal: member "userId:requestNo" of
--                  each ticket an occupy call took, joined by ",", score the
--                  accept time (Redis server ms)
-- ARGV[1] accept ms the entries are read below (exclusive)
-- ARGV[2] entries to skip (those earlier pages kept)
-- ARGV[3] entries to read at most
-- ARGV[4] tickets to judge at most: the page ends after the entry that
--         reaches it, so one call stays short whatever the entries hold
-- Returns {read, kept, more, userId, requestNo, accept ms, ...}: read
-- entries judged, kept of them left in the journal (the caller's next skip
-- grows by kept), more 1 when entries below ARGV[1] may follow, then a
-- triple per ticket held unclaimed. A part of an entry that is not
-- "userId:requestNo" (not written by the scripts) is ignored.
local entries = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[1],
  'WITHSCORES', 'LIMIT', tonumber(ARGV[2]), tonumber(ARGV[3]))
local cap = tonumber(ARGV[4])
local out = {0, 0, 0}
local read, kept, judged = 0, 0, 0
local drop = {}
for e = 1, #entries, 2 do
  if judged >= cap then
    break
  end
  local member, score = entries[e], entries[e + 1]
  local uids, rns = {}, {}
  for part in string.gmatch(member, '[^,]+') do
    local u, rn = string.match(part, '^(-?%d+):(.+)$')
    if u then
      uids[#uids + 1], rns[#rns + 1] = u, rn
    end
  end
  read = read + 1
  judged = judged + #uids
  local live = {}
  if #uids > 0 then
    local held = redis.call('HMGET', KEYS[1], unpack(uids))
    local hrns, hidx = {}, {}
    for i = 1, #uids do
      if held[i] == rns[i] then
        hrns[#hrns + 1], hidx[#hidx + 1] = rns[i], i
      end
    end
    if #hrns > 0 then
      local claimed = redis.call('SMISMEMBER', KEYS[2], unpack(hrns))
      for j, i in ipairs(hidx) do
        if claimed[j] == 0 then
          live[#live + 1] = i
        end
      end
    end
  end
  if #live == 0 then
    drop[#drop + 1] = member
  else
    kept = kept + 1
    for _, i in ipairs(live) do
      local j = #out
      out[j + 1], out[j + 2], out[j + 3] = uids[i], rns[i], score
    end
  end
end
if #drop > 0 then
  redis.call('ZREM', KEYS[3], unpack(drop))
end
out[1], out[2] = read, kept
if read < #entries / 2 or #entries / 2 == tonumber(ARGV[3]) then
  out[3] = 1
end
return out
