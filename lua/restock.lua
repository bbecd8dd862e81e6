-- restock: add units to a live SKU without touching occupancies.
-- KEYS[1] meta   hash (initial is raised by the same amount)
-- KEYS[2] stock  integer: remaining units
-- ARGV[1] units to add (an integer >= 1, else an error reply, nothing changed)
-- Returns {remaining, initial} after the change; an error reply "MISSING"
-- when the meta is gone (Redis lost the SKU or bucket: a restock must not
-- write a bare stock key and an initial-only meta, which would read as
-- present and stop the watcher's rebuild).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.error_reply('MISSING restock: the SKU has no meta')
end
local n = tonumber(ARGV[1])
if not n or n < 1 or n ~= math.floor(n) then
  return redis.error_reply('ERR restock: units must be an integer >= 1')
end
local rem = redis.call('INCRBY', KEYS[2], n)
local initial = redis.call('HINCRBY', KEYS[1], 'initial', n)
return {rem, initial}
