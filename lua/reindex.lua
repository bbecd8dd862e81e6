-- reindex: put in the pending journal the unclaimed records the caller found
-- in none of its entries (the reconciler's full comparison, which reads
-- every record anyway): a ticket taken before the journal existed, by an
-- older binary, or a hand edit. Each ticket is judged here, atomically, not
-- from the caller's possibly stale read: one whose record is gone, names
-- another ticket or is claimed is left out. A ticket already in an entry
-- may be added twice (a read racing an occupy cannot be, since occupy only
-- adds tickets of new requestNos): the sweeper judges each ticket by its
-- record, so that costs nothing but the entry.
-- KEYS[1] users    hash: userId -> requestNo
-- KEYS[2] claimed  set of claimed requestNos
-- KEYS[3] pending  sorted set, the journal (occupy_batch.lua's KEYS[7])
-- ARGV    triples: userId, requestNo, accept ms, ...
-- Returns the number of entries added (a one-ticket entry each).
local added = 0
for i = 1, #ARGV, 3 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1]
      and redis.call('SISMEMBER', KEYS[2], ARGV[i + 1]) == 0 then
    added = added + redis.call('ZADD', KEYS[3], 'NX', ARGV[i + 2], ARGV[i] .. ':' .. ARGV[i + 1])
  end
end
return added
