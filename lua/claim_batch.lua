-- claim_batch: claim n tickets of one SKU in one call, each as claim.lua
-- would (claims only read the user records, so order does not matter).
-- KEYS[1] users   hash: userId -> requestNo
-- KEYS[2] claimed set of claimed requestNos
-- ARGV    n pairs, ticket i = 1..n:
--   ARGV[2i-1] userId
--   ARGV[2i]   requestNo
-- Returns n codes, ticket i's at i: "CLAIMED" (now or before) or "NOT_HELD"
-- (the record does not name this requestNo: no order may be made for it).
-- Redis work per call: one HMGET and at most one SADD, whatever n is.
local n = #ARGV / 2
local uids = {}
for i = 1, n do
  uids[i] = ARGV[2 * i - 1]
end
local held = redis.call('HMGET', KEYS[1], unpack(uids))
local out, add = {}, {}
for i = 1, n do
  if held[i] == ARGV[2 * i] then
    out[i] = 'CLAIMED'
    add[#add + 1] = ARGV[2 * i]
  else
    out[i] = 'NOT_HELD'
  end
end
if #add > 0 then
  redis.call('SADD', KEYS[2], unpack(add))
end
return out
