-- Concurrency leases: at most max leases held at once in one set, each
-- expiring on its own, on the server's clock.
--
-- KEYS[1]   the lease set: a sorted set, one member per lease (its id),
--           scored by the lease's expiry in milliseconds since the Unix
--           epoch (by TIME)
-- ARGV[1]   "a": acquire (take or renew the lease); "e": extend (renew it
--           only if it is held)
-- ARGV[2]   lease id
-- ARGV[3]   max, the most leases held at once, >= 1
-- ARGV[4]   ttl of the lease in milliseconds, >= 1
--
-- Returns {held, in_flight, retry_ms}: held is 1 when the lease is held
-- after the call; in_flight the number of unexpired leases, this one
-- included when held; retry_ms, for a refused acquire, the time until the
-- oldest lease expires (at least 1), else 0.
--
-- Leases past their expiry leave the set on every call, so a holder that
-- crashed frees its slot at its lease's expiry without anyone's help. The
-- set's key expires with its latest lease, so an idle subject leaves
-- nothing behind; a call that finds the key without a TTL gives it back.
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local key, id = KEYS[1], ARGV[2]
local max, ttl = tonumber(ARGV[3]), tonumber(ARGV[4])

-- (a key of another type fails here with WRONGTYPE, before any write)
local mine = redis.call('ZSCORE', key, id)
mine = mine and tonumber(mine) > now
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
local n = redis.call('ZCARD', key)

-- the key lives as long as its latest lease
local function expire()
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then
    redis.call('PEXPIRE', key, math.max(tonumber(last[2]) - now, 1))
  end
end

if mine or (ARGV[1] == 'a' and n < max) then
  redis.call('ZADD', key, now + ttl, id)
  expire()
  if not mine then
    n = n + 1
  end
  return {1, n, 0}
end
if n > 0 and redis.call('PTTL', key) == -1 then
  expire()
end
if ARGV[1] == 'e' or n == 0 then
  return {0, n, 0}
end
local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
return {0, n, math.max(tonumber(oldest[2]) - now, 1)}
