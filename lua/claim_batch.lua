-- claim_batch: the consumer marks n tickets of one SKU as becoming orders,
-- n >= 1, before it writes them to the database. This is the one definition
-- of the claim rule (one ticket is a batch of one; claims only read the user
-- records, so order does not matter). A claimed ticket is no longer released
-- by the engine's compensation or the orphan sweeper (only by a forced
-- release). The pending journal is left alone: the orphan sweeper drops an
-- entry once none of its tickets is held unclaimed (pending_page.lua).
-- KEYS[1] users   hash: userId -> requestNo
-- KEYS[2] claimed set of claimed requestNos
-- ARGV    n pairs, ticket i = 1..n:
--   ARGV[2i-1] userId
--   ARGV[2i]   requestNo
-- Returns n codes, ticket i's at i: "CLAIMED" (now or before) or "NOT_HELD"
-- (the record does not name this requestNo: it was released, so no order
-- may be made for it).
-- Redis work per call: one HMGET, and where any ticket is held one SADD,
-- whatever n is.
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
