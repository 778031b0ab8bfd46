-- The design of ulule/limiter's Redis store, for comparison: INCRBY the
-- cost; a new counter gets its expiry, an old one is asked for its PTTL;
-- returns {count, ttl_ms}. It admits by the count alone, so a denied call
-- still counts.
--
-- KEYS[1]  the counter
-- ARGV[1]  the cost
-- ARGV[2]  the window, in milliseconds
local c = redis.call('INCRBY', KEYS[1], ARGV[1])
if c == tonumber(ARGV[1]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {c, tonumber(ARGV[2])}
end
return {c, redis.call('PTTL', KEYS[1])}
