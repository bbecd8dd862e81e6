-- seed.lua — seed 001 §9.2's occupy script exactly as the article prints it:
-- the script a user writes first, and the bench's yardstick for the accept
-- path (bench/refs/evalsha -script seed).
-- KEYS[1] = stock key
-- KEYS[2] = user set key
-- KEYS[3] = activity status key
-- ARGV[1] = userId
-- Returns 0 not started or closed, 1 sold out, 2 duplicate, 3 occupied.

local activityStatus = redis.call('GET', KEYS[3])
if not activityStatus or activityStatus ~= 'ONLINE' then
    return 0
end

if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then
    return 2
end

local stock = redis.call('GET', KEYS[1])
if not stock or tonumber(stock) <= 0 then
    return 1
end

redis.call('DECR', KEYS[1])
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('EXPIRE', KEYS[2], 172800)
return 3
