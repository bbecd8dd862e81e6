-- edge_heartbeat: announce one edge and count the live ones (edge/fleet.go).
-- KEYS[1] edges  sorted set: member = edge id, score = its expiry in
--                Redis server milliseconds
-- ARGV[1] edge id
-- ARGV[2] ttl in milliseconds (an integer >= 1)
-- Returns the number of live edges, this one included. Expired members are
-- removed first; the clock is the Redis server's (TIME), so the edges'
-- clocks need not agree. O(log N) for N edges, one round trip.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
if not ttl or ttl < 1 then
  return redis.error_reply('ERR edge_heartbeat: ttl must be an integer >= 1')
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
return redis.call('ZCARD', KEYS[1])
