-- GCRA for one limit of whole milliseconds with its state in the key's
-- expiry, written blind: PTTL is read, and SET replaces whatever the key
-- held, so a key holding something else (another program's value) is
-- overwritten instead of reported.
--
-- KEYS[1]   the limit's key; its PTTL is the TAT - now
-- ARGV[1]   emission interval, milliseconds
-- ARGV[2]   burst
-- ARGV[3]   cost (0: a peek)
--
-- Returns {allowed, remaining, reset_ms, retry_ms}.
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local d = math.max(redis.call('PTTL', KEYS[1]), 0)
local n = d + cost * interval
if cost > burst or n > burst * interval then
  local retry = n - burst * interval
  if cost > burst then
    retry = -1
  end
  return {0, math.floor((burst * interval - d) / interval), d, retry}
end
if cost > 0 then
  redis.call('SET', KEYS[1], n, 'PX', n)
end
return {1, math.floor((burst * interval - n) / interval), n, 0}
