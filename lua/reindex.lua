-- reindex: make the pending index agree with the user records for the
-- tickets given (the reconciler's full comparison, which reads every
-- record anyway). A record that is not claimed belongs in the index, under
-- the accept time given (a ticket taken before the index existed, by an
-- older binary); an entry whose record is gone, names another ticket or is
-- claimed does not (an older consumer's claim, a hand edit). Each ticket is
-- judged here, atomically, not from the caller's possibly stale read.
-- KEYS[1] users    hash: userId -> requestNo
-- KEYS[2] claimed  set of claimed requestNos
-- KEYS[3] pending  sorted set: "userId:requestNo" -> accept ms
-- ARGV    triples: userId, requestNo, accept ms (used where added), ...
-- Returns {added, removed}. An entry already present keeps its time.
local added, removed = 0, 0
for i = 1, #ARGV, 3 do
  local member = ARGV[i] .. ':' .. ARGV[i + 1]
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1]
      and redis.call('SISMEMBER', KEYS[2], ARGV[i + 1]) == 0 then
    added = added + redis.call('ZADD', KEYS[3], 'NX', ARGV[i + 2], member)
  else
    removed = removed + redis.call('ZREM', KEYS[3], member)
  end
end
return {added, removed}
