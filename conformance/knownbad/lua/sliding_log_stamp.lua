-- Sliding log whose member is the timestamp alone, as often written by
-- hand: units admitted in the same microsecond are one member, so the log
-- undercounts bursts and admits too many.
--
-- KEYS[1]   log of one limit (sorted set scored by microseconds)
-- ARGV[1]   rate
-- ARGV[2]   window, milliseconds
-- ARGV[3]   cost (0: read only)
--
-- Returns {allowed, remaining, reset_ms, retry_ms}.
redis.replicate_commands()
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local rate = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window * 1000)
local count = redis.call('ZCARD', KEYS[1])
if count + cost > rate then
  local retry = window
  if cost > rate then
    retry = -1
  end
  return {0, rate - count, window, retry}
end
for _ = 1, cost do
  redis.call('ZADD', KEYS[1], now, now)
end
if cost > 0 then
  redis.call('PEXPIRE', KEYS[1], window)
end
return {1, rate - count - cost, window, 0}
