-- Concurrency leases in a sorted set by expiry, one script, as it should
-- be, but a refusal first gives a set found without a TTL its expiry back
-- (that of its latest lease) and then reads the lease whose end frees a
-- slot: on a set the server deleted at that PEXPIRE (its latest lease
-- ending within the command), the read finds nothing and the script fails.
--
-- KEYS[1]   the lease set
-- ARGV[1]   lease id
-- ARGV[2]   max
-- ARGV[3]   ttl, milliseconds
--
-- Returns {held, in_flight, retry_ms}.
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local key, id = KEYS[1], ARGV[1]
local max, ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
local n = redis.call('ZCARD', key)
if n < max or redis.call('ZSCORE', key, id) then
  redis.call('ZADD', key, now + ttl, id)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  redis.call('PEXPIRE', key, tonumber(last[2]) - now)
  return {1, redis.call('ZCARD', key), 0}
end
if redis.call('PTTL', key) == -1 then
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  redis.call('PEXPIRE', key, tonumber(last[2]) - now)
end
local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
return {0, n, math.max(tonumber(first[2]) - now, 1)}
