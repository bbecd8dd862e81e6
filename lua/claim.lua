-- claim: the consumer marks a ticket as becoming an order, before it writes
-- the order to the database. A claimed ticket is no longer released by the
-- engine's compensation or the orphan sweeper (only by a forced release).
-- KEYS[1] users   hash: userId -> requestNo
-- KEYS[2] claimed set of claimed requestNos
-- ARGV[1] userId
-- ARGV[2] requestNo
-- Returns "CLAIMED" (now or before) or "NOT_HELD" (the record does not name
-- this requestNo: it was released, so no order may be made for it).
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then
  return 'NOT_HELD'
end
redis.call('SADD', KEYS[2], ARGV[2])
return 'CLAIMED'
