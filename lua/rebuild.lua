-- rebuild: write a SKU (or one bucket of a SKU split into buckets) whose keys
-- Redis lost back from the database, in one atomic step, so that no buyer
-- and no consumer sees it half written.
-- Remaining = initial − ordered (+ credited − debited for a bucket):
-- occupancies that were live when Redis lost its data are gone with it
-- (their messages fail the claim and are answered FAIL), so only the
-- database's orders still hold stock.
-- KEYS[1] meta, KEYS[2] stock, KEYS[3] users, KEYS[4] sold, KEYS[5] claimed,
-- KEYS[6] closed, KEYS[7] qty, KEYS[8] pending (emptied: every record
-- written back is claimed)
-- KEYS[9] xfer    only for a bucket: its transfer record, replaced by the
--                 pairs ARGV gives ("in", "out", "from:<b>", "to:<b>")
-- ARGV[1] initial units
-- ARGV[2] units of the live orders
-- ARGV[3] n: the number of meta field/value pairs that follow
-- ARGV[4] m: the number of live-order triples after the meta pairs
-- ARGV[5] x: the number of transfer-record field/value pairs after the
--            meta pairs (0 without KEYS[9]); "in" adds to the remaining
--            units, "out" takes from them
-- ARGV[6 .. 5+2n]              meta fields and values (status, start_ms,
--                              end_ms, limit, price, activity, rebuy,
--                              soldout)
-- ARGV[6+2n .. 5+2n+2x]        transfer-record fields and values
-- ARGV[6+2n+2x .. +3m]         triples userId, requestNo, units of the live
--                              orders (claimed; units recorded in qty where
--                              > 0)
-- ARGV[..]                     pairs userId, requestNo of orders closed
--                              unpaid (closed; a user's later pair wins)
-- Returns "REBUILT", or "EXISTS" when the meta key is present (another
-- process rebuilt or preheated it first): nothing changed.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 'EXISTS'
end
local initial = tonumber(ARGV[1])
local ordered = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local x = tonumber(ARGV[5])
local xferFrom = 6 + 2 * n
local first = xferFrom + 2 * x
local closedFrom = first + 3 * tonumber(ARGV[4])
local rem = initial - ordered
if KEYS[9] then
  -- What a debit of the lost bucket left behind (a debit finds no stock
  -- key and records 0) goes with the rest of its old record.
  redis.call('DEL', KEYS[9])
end
for i = xferFrom, first - 1, 2 do
  redis.call('HSET', KEYS[9], ARGV[i], ARGV[i + 1])
  if ARGV[i] == 'in' then
    rem = rem + tonumber(ARGV[i + 1])
  elseif ARGV[i] == 'out' then
    rem = rem - tonumber(ARGV[i + 1])
  end
end
if rem < 0 then
  rem = 0
end
redis.call('DEL', KEYS[3], KEYS[5], KEYS[7], KEYS[8])
redis.call('SET', KEYS[2], rem)
redis.call('SET', KEYS[4], ordered)
for i = first, closedFrom - 1, 3 do
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
  redis.call('SADD', KEYS[5], ARGV[i + 1])
  if tonumber(ARGV[i + 2]) > 0 then
    redis.call('HSET', KEYS[7], ARGV[i + 1], ARGV[i + 2])
  end
end
for i = closedFrom, #ARGV, 2 do
  redis.call('HSET', KEYS[6], ARGV[i], ARGV[i + 1])
end
-- Meta last: it is what makes the SKU sellable.
for i = 6, xferFrom - 1, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('HSET', KEYS[1], 'initial', initial)
return 'REBUILT'
