-- GCRA with the caller's clock, as often written by hand: the app server
-- passes "now", so servers whose clocks disagree share one TAT wrongly.
--
-- KEYS[1]   TAT in milliseconds
-- ARGV[1]   now, milliseconds (the app's clock)
-- ARGV[2]   emission interval, milliseconds
-- ARGV[3]   burst
-- ARGV[4]   cost
--
-- Returns {allowed, remaining, reset_ms, retry_ms}.
local now = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then
  tat = now
end
local new = tat + cost * interval
if new - now > burst * interval then
  local retry = new - now - burst * interval
  if cost > burst then
    retry = -1
  end
  return {0, math.floor((burst * interval - (tat - now)) / interval), tat - now, retry}
end
if cost > 0 then
  redis.call('SET', KEYS[1], new, 'PX', new - now)
end
return {1, math.floor((burst * interval - (new - now)) / interval), new - now, 0}
