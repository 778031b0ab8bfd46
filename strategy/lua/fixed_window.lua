-- Fixed window counter, several limits decided at once, all or nothing.
--
-- KEYS[i]        counter of limit i (all keys in one Cluster slot)
-- ARGV[1]        cost, >= 0
-- ARGV[2]        "1": decide but write nothing (peek); "0": decide and write
-- ARGV[1+2i]     rate of limit i
-- ARGV[2+2i]     window of limit i, in milliseconds
--
-- Returns {allowed, remaining_1, reset_ms_1, retry_ms_1, remaining_2, ...}:
-- allowed is 1 or 0 (for a peek: whether the cost would be admitted);
-- remaining is after the decision; retry_ms is 0 for a limit that admits, -1 when the cost
-- can never fit, else the wait until the window resets.
--
-- A window starts when its counter is created (SET ... PX) and ends when the
-- key expires: the expiry is set once per window, never moved, so the window
-- never slides. A counter found without a TTL (a leak from elsewhere) gets
-- one back on the next writing call. Denied calls consume nothing.
local cost = tonumber(ARGV[1])
local write = ARGV[2] == '0' and cost > 0
local n = #KEYS
local counts, ttls = {}, {}
local allowed = 1

for i = 1, n do
  local rate = tonumber(ARGV[1 + 2 * i])
  local window = tonumber(ARGV[2 + 2 * i])
  local count = 0
  local ttl = window
  local v = redis.call('GET', KEYS[i])
  if v then
    count = tonumber(v)
    ttl = redis.call('PTTL', KEYS[i])
    if ttl < 0 then
      ttl = window
      if write then
        redis.call('PEXPIRE', KEYS[i], window)
      end
    end
  end
  counts[i] = count
  ttls[i] = ttl
  if count + cost > rate then
    allowed = 0
  end
end

if allowed == 1 and write then
  for i = 1, n do
    if counts[i] == 0 then
      redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2 + 2 * i])
    else
      redis.call('INCRBY', KEYS[i], ARGV[1])
    end
  end
end

local out = {allowed}
for i = 1, n do
  local rate = tonumber(ARGV[1 + 2 * i])
  local used = counts[i]
  if allowed == 1 and write then
    used = used + cost
  end
  local retry = 0
  if cost > rate then
    retry = -1
  elseif counts[i] + cost > rate then
    retry = ttls[i]
  end
  out[#out + 1] = rate - used
  out[#out + 1] = ttls[i]
  out[#out + 1] = retry
end
return out
