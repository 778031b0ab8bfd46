-- Concurrency leases: at most max leases held at once in one set, each
-- expiring on its own, on the server's clock.
--
-- KEYS[1]   the lease set: a sorted set, one member per lease (its id),
--           scored by the lease's expiry in milliseconds since the Unix
--           epoch (by TIME); an abandoned id is scored by minus its
--           tombstone's expiry
-- ARGV[1]   "a": acquire (take or renew the lease); "e": extend (renew it
--           only if it is held); "x": abandon (end the lease, and refuse an
--           acquire of the id that arrives later, for ttl)
-- ARGV[2]   lease id
-- ARGV[3]   max, the most leases held at once, >= 1
-- ARGV[4]   ttl of the lease in milliseconds, >= 1
--
-- Returns {held, in_flight, retry_ms}: held is 1 when the lease is held
-- after the call; in_flight the number of unexpired leases, this one
-- included when held; retry_ms, for a refused acquire, the time until
-- enough leases expire for it (the oldest, or more when more than max are
-- held; at least 1), else 0.
--
-- Leases past their expiry leave the set on every call, so a holder that
-- crashed frees its slot at its lease's expiry without anyone's help. The
-- set's key expires with its latest lease (or tombstone), so an idle
-- subject leaves nothing behind; a call that finds the key without a TTL
-- gives it back.
--
-- Abandon is for an acquire whose reply was lost or came too late: a
-- release (ZREM) may run before the acquire itself, still on its way, and
-- the acquire would then hold a slot nobody holds until its TTL ends. The
-- tombstone, the id with a negative score, is not a lease (leases are the
-- members scored above 0) and makes that acquire a refusal.
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local key, op, id = KEYS[1], ARGV[1], ARGV[2]
local max, ttl = tonumber(ARGV[3]), tonumber(ARGV[4])

-- (a key of another type fails here with WRONGTYPE, before any write)
local score = tonumber(redis.call('ZSCORE', key, id))
local mine = score and score > now
local gone = score and score < 0 and -score > now
-- expired leases, scored in (0, now], and expired tombstones, in [-now, 0)
redis.call('ZREMRANGEBYSCORE', key, string.format('%d', -now), string.format('%d', now))

-- the key lives as long as its latest lease and its latest tombstone
local function expire()
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  local at = math.max(tonumber(last[2] or 0), -tonumber(first[2] or 0))
  if at > now then
    redis.call('PEXPIRE', key, string.format('%d', at - now))
  end
end

-- (every read of a branch before its expire(): Redis deletes a key at
-- PEXPIRE when the new expiry is already past by its clock, which a lease
-- ending within a millisecond or two can make it, and a read after it
-- would find no key)
if op == 'x' then
  redis.call('ZADD', key, string.format('%d', -(now + ttl)), id)
  local held = redis.call('ZCOUNT', key, '(0', '+inf')
  expire()
  return {0, held, 0}
end
local n = redis.call('ZCOUNT', key, '(0', '+inf')
if not gone and (mine or (op == 'a' and n < max)) then
  redis.call('ZADD', key, string.format('%d', now + ttl), id)
  expire()
  if not mine then
    n = n + 1
  end
  return {1, n, 0}
end
local out = {0, n, 0}
if not (op == 'e' or gone or n < max) then
  -- a slot frees when n - max + 1 leases have expired (more than one when
  -- the caller's max is below what is held: a max lowered meanwhile)
  local frees = redis.call('ZRANGEBYSCORE', key, '(0', '+inf', 'WITHSCORES', 'LIMIT', n - max, 1)
  out[3] = math.max(tonumber(frees[2]) - now, 1)
end
if redis.call('PTTL', key) == -1 then
  expire()
end
return out
