-- restore: give live orders back the user records Redis lost (the
-- reconciler's repair of "order without claim"). Counters are not touched:
-- a record restored here only makes the occupy script answer DUPLICATE to
-- the order's buyer again and lets a later close release the order's units.
-- KEYS[1] users    hash: userId -> requestNo
-- KEYS[2] claimed  set of claimed requestNos
-- KEYS[3] qty      hash: requestNo -> units
-- ARGV    triples: userId, requestNo, units (written to qty where > 0), ...
-- A user who holds a record already (another ticket) keeps it.
-- Returns the number of records restored.
local n = 0
for i = 1, #ARGV, 3 do
  if redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) == 1 then
    redis.call('SADD', KEYS[2], ARGV[i + 1])
    if tonumber(ARGV[i + 2]) > 0 then
      redis.call('HSET', KEYS[3], ARGV[i + 1], ARGV[i + 2])
    end
    n = n + 1
  end
end
return n
