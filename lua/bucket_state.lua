-- bucket_state: read, in one atomic step, what a rebuild of lost buckets of
-- a SKU needs to know of one bucket (DESIGN §5, "Buckets"): whether it is
-- there, its initial and sold-out mark, and its transfers with each lost
-- bucket as it recorded them.
-- KEYS[1] meta    hash (initial, soldout)
-- KEYS[2] xfer    hash: the bucket's transfer record (transfer_debit.lua,
--                 transfer_credit.lua)
-- ARGV[1..]       the numbers of the lost buckets
-- Returns {meta exists (0/1), initial, soldout (0/1), in, out, Σ from:*,
-- Σ to:*}, then for each ARGV bucket b three values: "to:<b>" (units ever
-- debited toward b), "from:<b>" (units ever credited from b) and the units
-- of the transfers toward b debited here and not yet settled ("f:" entries
-- naming b). A missing counter reads 0. Σ from:* = in and Σ to:* = out
-- unless the record predates the per-bucket counters.
local meta = redis.call('HMGET', KEYS[1], 'initial', 'soldout')
local out = {
  redis.call('EXISTS', KEYS[1]),
  tonumber(meta[1] or '0'),
  (meta[2] == '1') and 1 or 0,
  0, 0, 0, 0,
}
local to, from, flight = {}, {}, {}
local rec = redis.call('HGETALL', KEYS[2])
for i = 1, #rec, 2 do
  local f, v = rec[i], rec[i + 1]
  if f == 'in' then
    out[4] = tonumber(v)
  elseif f == 'out' then
    out[5] = tonumber(v)
  elseif string.sub(f, 1, 5) == 'from:' then
    out[6] = out[6] + tonumber(v)
    from[string.sub(f, 6)] = tonumber(v)
  elseif string.sub(f, 1, 3) == 'to:' then
    out[7] = out[7] + tonumber(v)
    to[string.sub(f, 4)] = tonumber(v)
  elseif string.sub(f, 1, 2) == 'f:' then
    local dst, units = string.match(v, '^(%d+):(%d+)$')
    if dst then
      flight[dst] = (flight[dst] or 0) + tonumber(units)
    end
  end
end
for _, b in ipairs(ARGV) do
  table.insert(out, to[b] or 0)
  table.insert(out, from[b] or 0)
  table.insert(out, flight[b] or 0)
end
return out
