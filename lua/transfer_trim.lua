-- transfer_trim: bound a bucket's transfer record (transfer_debit.lua,
-- transfer_credit.lua) by dropping the per-id entries of finished
-- transfers once they are older than ARGV[1] ms by the server's clock.
-- A "d:<id>" entry makes a retried debit answer its first answer, a
-- "c:<id>" entry a repeated credit a no-op; both are only ever needed for
-- the seconds a transfer's own retries and a concurrent FinishTransfers
-- take. An "f:<id>" entry (debited, not credited) is never dropped, nor a
-- "d:<id>" whose "f:<id>" is still there, nor an entry without a time
-- (written before entries carried one). A "c:<id>" whose transfer is
-- still in flight on its source (ARGV[3..]: the source's settle after the
-- credit failed or was lost, so FinishTransfers credits it again) is not
-- dropped either, nor any "c:" entry while a bucket's record could not be
-- read (ARGV[2] "1"). The totals ("in", "out", "to:<b>", "from:<b>") stay.
-- KEYS[1] xfer    hash: the bucket's transfer record
-- ARGV[1] keep    ms an entry is kept after it was written (>= 1)
-- ARGV[2] credits "1": keep every "c:" entry (a bucket's in-flight
--                 transfers are not known); else "0"
-- ARGV[3..] ids   transfers in flight on any bucket of the SKU
-- Returns the number of entries dropped.
local keep = tonumber(ARGV[1])
if not keep or keep < 1 then
  return redis.error_reply('transfer_trim: keep must be at least 1 ms')
end
local now = redis.call('TIME')
local before = now[1] * 1000 + math.floor(now[2] / 1000) - keep
local rec = redis.call('HGETALL', KEYS[1])
local open = {}
for i = 1, #rec, 2 do
  if string.sub(rec[i], 1, 2) == 'f:' then
    open[string.sub(rec[i], 3)] = true
  end
end
local keepCredits = ARGV[2] == '1'
local inFlight = {}
for i = 3, #ARGV do
  inFlight[ARGV[i]] = true
end
local drop = {}
for i = 1, #rec, 2 do
  local f, kind = rec[i], string.sub(rec[i], 1, 2)
  local id = string.sub(f, 3)
  if (kind == 'd:' and not open[id]) or (kind == 'c:' and not keepCredits and not inFlight[id]) then
    local at = tonumber(string.match(rec[i + 1], '|(%d+)$'))
    if at and at < before then
      table.insert(drop, f)
    end
  end
end
for i = 1, #drop, 1000 do
  redis.call('HDEL', KEYS[1], unpack(drop, i, math.min(i + 999, #drop)))
end
return #drop
