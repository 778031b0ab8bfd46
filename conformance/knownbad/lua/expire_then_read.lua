-- Fixed window as often written by hand, repairing a lost TTL: the count
-- first, the expiry when the counter has none (or one beyond its window),
-- then the counter read back for the reply (a denial only repairs the
-- expiry). The read comes after the expiry: when the server deletes the
-- key at that PEXPIRE (its new expiry already past by the server's clock,
-- which a window of a millisecond or two can be), GET finds no key, the
-- arithmetic on nil fails the script, and the caller gets an error for an
-- admission the script had counted.
--
-- KEYS[1]   counter of one limit
-- ARGV[1]   rate
-- ARGV[2]   window, milliseconds
-- ARGV[3]   cost (0: read only)
--
-- Returns {allowed, remaining, reset_ms, retry_ms}.
local rate, window, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local c = tonumber(redis.call('GET', KEYS[1]) or '0')
if cost == 0 then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl < 0 then
    ttl = window
  end
  if c < rate then
    return {1, rate - c, ttl, 0}
  end
  return {0, 0, ttl, ttl}
end
if c + cost > rate then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl < 0 or ttl > window then
    redis.call('PEXPIRE', KEYS[1], window)
    ttl = window
  end
  local retry = ttl
  if cost > rate then
    retry = -1
  end
  return {0, math.max(rate - c, 0), ttl, retry}
end
redis.call('INCRBY', KEYS[1], cost)
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 or ttl > window then
  redis.call('PEXPIRE', KEYS[1], window)
  ttl = window
end
local now = tonumber(redis.call('GET', KEYS[1]))
return {1, rate - now, ttl, 0}
