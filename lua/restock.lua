-- restock: add units to a live SKU without touching occupancies.
-- KEYS[1] meta   hash (initial is raised by the same amount)
-- KEYS[2] stock  integer: remaining units
-- ARGV[1] units to add (positive integer)
-- Returns {remaining, initial} after the change.
local n = tonumber(ARGV[1])
local rem = redis.call('INCRBY', KEYS[2], n)
local initial = redis.call('HINCRBY', KEYS[1], 'initial', n)
return {rem, initial}
