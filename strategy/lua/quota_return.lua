-- A fixed window's end, and units given back to it (quota leases).
--
-- KEYS[1]   a fixed window's counter (a decimal integer that expires when
--           its window ends)
-- ARGV[1]   "0": read the window's end; "1": give units back to it
-- ARGV[2]   units to give back ("1"), >= 1
-- ARGV[3]   the end of the window they were counted in ("1"), in
--           milliseconds since the Unix epoch on this server's clock
--
-- "0" returns {end_ms, pttl_ms}: {0, -2} without a key, {0, -1} for a key
-- without a TTL. "1" returns 1 when the units were taken off the count, 0
-- when the counter's window is not the one that ends at ARGV[3] (the key
-- expired, or was deleted and counted anew: its end differs), or counts
-- fewer than the units; a key that is not a string (WRONGTYPE) or not a
-- counter is an error, and nothing is written.
--
-- The end is PEXPIRETIME, exact to the millisecond (Redis 7.0 and later);
-- on an older server TIME + PTTL, exact to a millisecond either way. Two
-- readings of one window are taken as the same end within 2 ms (servers
-- whose clock moves between TIME and the key's expiry check, miniredis on
-- a real clock); a window counted anew after the first ended ends at least
-- a Period later.
local key = KEYS[1]

-- the window's end, or -2 (no key), -1 (no TTL)
local function window_end()
  local e = redis.pcall('PEXPIRETIME', key)
  if type(e) == 'number' then
    return e
  end
  local p = redis.call('PTTL', key)
  if p < 0 then
    return p
  end
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000) + p
end

local e = window_end()
if ARGV[1] == '0' then
  if e < 0 then
    return {0, e}
  end
  return {e, redis.call('PTTL', key)}
end
local units, want = tonumber(ARGV[2]), tonumber(ARGV[3])
if e < 0 or math.abs(e - want) > 2 then
  return 0
end
local v = redis.call('GET', key)
if not string.match(v, '^%d+$') or #v > 16 then
  return redis.error_reply('ERR limiter corrupt counter: the key holds no count')
end
if tonumber(v) < units then
  return 0
end
redis.call('DECRBY', key, ARGV[2])
return 1
