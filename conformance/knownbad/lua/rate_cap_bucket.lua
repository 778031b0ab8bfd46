-- Token bucket as often written by hand, in integers (a token is P units,
-- P the period in ms, and R units come back every millisecond: exact),
-- whose capacity is taken to be its rate ("at most Rate per Period"): a
-- refill is capped at Rate tokens, and the key lives until the bucket
-- holds them; only a new bucket holds its burst. A bucket whose burst is
-- below its rate holds more than its burst once it has idled.
--
-- KEYS[i]        bucket of limit i, "<s>:<ts>": s the units it held at
--                ts, the server's clock in ms
-- ARGV[1]        cost (0: nothing written)
-- ARGV[2]        "1": peek
-- ARGV[3i]       rate R of limit i
-- ARGV[3i+1]     period P of limit i, in ms
-- ARGV[3i+2]     burst B of limit i
--
-- Returns {allowed, remaining_1, reset_ms_1, retry_ms_1, ...}, all or
-- nothing over the limits. A call that writes stores every bucket it
-- found refilled (and, admitted, less the cost), denied or not.
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local cost = tonumber(ARGV[1])
local write = ARGV[2] == '0' and cost > 0
local n = #KEYS
local units, seen, allowed = {}, {}, 1
for i = 1, n do
  local rate, period, burst = tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1]), tonumber(ARGV[3 * i + 2])
  local v = redis.call('GET', KEYS[i])
  local s = burst * period
  if v then
    local a, b = string.match(v, '^(%d+):(%d+)$')
    if not a or #a > 15 or #b > 15 then
      return redis.error_reply('ERR limiter corrupt counter: the key of limit ' .. i .. ' holds no bucket')
    end
    s = math.min(rate * period, tonumber(a) + math.max(now - tonumber(b), 0) * rate)
    seen[i] = true
  end
  units[i] = s
  if cost > burst or s < cost * period then
    allowed = 0
  end
end
local out = {allowed}
for i = 1, n do
  local rate, period, burst = tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1]), tonumber(ARGV[3 * i + 2])
  local s = units[i]
  local retry = 0
  if cost > burst then
    retry = -1
  elseif s < cost * period then
    retry = math.max(1, math.ceil((cost * period - s) / rate))
  end
  if allowed == 1 and write then
    s = s - cost * period
  end
  -- until the bucket holds Rate tokens
  local full = math.ceil(math.max(rate * period - s, 0) / rate)
  if write and (allowed == 1 or seen[i]) then
    if full > 0 then
      redis.call('SET', KEYS[i], string.format('%d:%d', s, now), 'PX', string.format('%d', full))
    else
      redis.call('DEL', KEYS[i])
    end
  end
  out[#out + 1] = math.floor(s / period)
  out[#out + 1] = full
  out[#out + 1] = retry
end
return out
