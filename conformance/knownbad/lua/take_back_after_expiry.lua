-- Fixed window as often written by hand, repairing a lost TTL: the count
-- first, the expiry when the counter has none (or one beyond its window),
-- then the take-back of a denial. The take-back comes after the expiry:
-- when the server deletes the key at that PEXPIRE (its new expiry already
-- past by the server's clock, which a window of a millisecond or two can
-- be), DECRBY makes a negative counter without a TTL, and the subject's
-- next calls fail.
--
-- KEYS[1]   counter of one limit
-- ARGV[1]   rate
-- ARGV[2]   window, milliseconds
-- ARGV[3]   cost (0: read only)
--
-- Returns {allowed, remaining, reset_ms, retry_ms}.
local rate, window, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if cost == 0 then
  local c = tonumber(redis.call('GET', KEYS[1]) or '0')
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl < 0 then
    ttl = window
  end
  if c < rate then
    return {1, rate - c, ttl, 0}
  end
  return {0, 0, ttl, ttl}
end
local c = redis.call('INCRBY', KEYS[1], cost)
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 or ttl > window then
  redis.call('PEXPIRE', KEYS[1], window)
  ttl = window
end
if c > rate then
  redis.call('DECRBY', KEYS[1], cost)
  local retry = ttl
  if cost > rate then
    retry = -1
  end
  return {0, math.max(rate - c + cost, 0), ttl, retry}
end
return {1, rate - c, ttl, 0}
