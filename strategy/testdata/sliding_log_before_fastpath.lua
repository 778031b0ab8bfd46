-- Sliding log: every admitted unit of cost is a member of a sorted set
-- scored by its time; a limit admits when the units of the last window
-- plus the cost fit its rate. Several limits decided at once, all or
-- nothing, on the server's clock.
--
-- KEYS[i]        log of limit i (all keys in one Cluster slot): a sorted set
--                of members "<nonce>:<j>" scored by microseconds since the
--                Unix epoch
-- ARGV[1]        cost, >= 0
-- ARGV[2]        "1": decide but write nothing (peek); "0": decide and write
-- ARGV[3]        nonce, unique per call (the members of one instant differ)
-- ARGV[2+2i]     rate of limit i
-- ARGV[3+2i]     window of limit i, in milliseconds
--
-- Returns {allowed, remaining_1, reset_ms_1, retry_ms_1, remaining_2, ...}:
-- allowed is 1 or 0 (for a peek: whether the cost would be admitted);
-- remaining is after the decision; reset_ms is the time until the log is
-- empty (0 when it is); retry_ms is 0 for a limit that admits, -1 when the
-- cost can never fit (cost > rate), else the wait until enough of the
-- oldest units have left the window (at least 1).
--
-- Every key's type is checked before anything is written: a key that is
-- not a sorted set is an error, and the call writes nothing. A writing call
-- trims what left the window and leaves each log expiring one window after
-- its newest member, so an idle subject leaves nothing behind.
-- (Redis 5 and later replicate a script's effects, so writing after TIME
-- needs no redis.replicate_commands.)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cost = tonumber(ARGV[1])
local write = ARGV[2] == '0' and cost > 0
local n = #KEYS

for i = 1, n do
  local typ = redis.call('TYPE', KEYS[i])
  typ = typ.ok or typ
  if typ ~= 'zset' and typ ~= 'none' then
    return redis.error_reply('ERR limiter corrupt counter: the key of limit ' .. i .. ' holds no sliding log')
  end
end

local counts, allowed = {}, 1
for i = 1, n do
  local rate = tonumber(ARGV[2 + 2 * i])
  local window = tonumber(ARGV[3 + 2 * i]) * 1000
  -- units still in the window: scored after now - window (whole
  -- microseconds; numbers are passed as numbers, never concatenated, which
  -- would round them to 14 digits)
  counts[i] = redis.call('ZCOUNT', KEYS[i], now - window + 1, '+inf')
  if counts[i] + cost > rate then
    allowed = 0
  end
end

-- ZADD comes first: a script's first write is where Redis refuses it
-- under maxmemory (OOM), and after any write it would not refuse the rest.
if write and allowed == 1 then
  for i = 1, n do
    local j = 0
    while j < cost do
      local batch = {}
      for k = j + 1, math.min(j + 500, cost) do
        batch[#batch + 1] = now
        batch[#batch + 1] = ARGV[3] .. ':' .. k
      end
      redis.call('ZADD', KEYS[i], unpack(batch))
      j = j + 500
    end
  end
end

local ttls = {}
if write then
  for i = 1, n do
    local window = tonumber(ARGV[3 + 2 * i])
    local added = 0
    if allowed == 1 then
      added = cost
    end
    if redis.call('ZCARD', KEYS[i]) > counts[i] + added then
      redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - window * 1000)
    end
    if allowed == 1 then
      redis.call('PEXPIRE', KEYS[i], window)
    else
      -- a denial adds nothing, but a log found without its expiry, or
      -- with one longer than its window, gets it back; one that would
      -- expire before its newest unit leaves the window gets that long
      -- (since the lengthened-period fix, in both this reference and the
      -- script)
      local ttl = redis.call('PTTL', KEYS[i])
      if ttl == -1 or ttl > window then
        redis.call('PEXPIRE', KEYS[i], window)
        ttl = -1
      elseif counts[i] > 0 then
        local m = redis.call('ZRANGE', KEYS[i], -1, -1, 'WITHSCORES')
        local need = math.floor((tonumber(m[2]) + window * 1000 - now + 999) / 1000)
        if ttl < need then
          redis.call('PEXPIRE', KEYS[i], need)
        end
      end
      ttls[i] = ttl
    end
  end
end

local out = {allowed}
for i = 1, n do
  local rate = tonumber(ARGV[2 + 2 * i])
  local window = tonumber(ARGV[3 + 2 * i]) * 1000
  local used = counts[i]
  if allowed == 1 and write then
    used = used + cost
  end
  local retry = 0
  if cost > rate then
    retry = -1
  elseif counts[i] + cost > rate then
    -- the unit whose leaving makes room: the (counts + cost - rate)-th
    -- oldest of the window
    local first = counts[i] + cost - rate
    local m = redis.call('ZRANGEBYSCORE', KEYS[i], now - window + 1, '+inf', 'WITHSCORES', 'LIMIT', first - 1, 1)
    retry = math.max(1, math.floor((tonumber(m[2]) + window - now + 999) / 1000))
  end
  -- the log is empty one window after its newest unit (read from its
  -- score since the reset fix, in both this reference and the script)
  local reset = 0
  if allowed == 1 and write then
    reset = window / 1000
  elseif used > 0 then
    local m = redis.call('ZRANGE', KEYS[i], -1, -1, 'WITHSCORES')
    reset = math.max(1, math.floor((tonumber(m[2]) + window - now + 999) / 1000))
  end
  out[#out + 1] = rate - used
  out[#out + 1] = reset
  out[#out + 1] = retry
end
return out
