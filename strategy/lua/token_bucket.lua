-- Token bucket, several limits decided at once, all or nothing, on the
-- server's clock, in integers only.
--
-- KEYS[i]        bucket of limit i (all keys in one Cluster slot): a hash
--                with t, the time of the last refill in microseconds since
--                the Unix epoch, and s, the tokens scaled by the period in
--                microseconds (a token is P units, and R units come back
--                every microsecond), both decimal integers
-- ARGV[1]        cost, >= 0
-- ARGV[2]        "1": decide but write nothing (peek); "0": decide and write
-- ARGV[3i]       rate R of limit i (tokens per period)
-- ARGV[3i+1]     period P of limit i, in microseconds
-- ARGV[3i+2]     capacity (burst) B of limit i, in tokens
--
-- Returns {allowed, remaining_1, reset_ms_1, retry_ms_1, remaining_2, ...}:
-- remaining is the whole tokens left after the decision; reset_ms the time
-- until the bucket is full (0 when it is); retry_ms is 0 for a limit that
-- admits, -1 when the cost can never fit (cost > B), else the wait until
-- enough tokens have come back (at least 1).
--
-- Every product stays below 2^53 (the caller bounds B * P), so the
-- arithmetic is exact: no drift however long the bucket lives. Every
-- bucket is read and checked before anything is written: a key that is not
-- a hash of two non-negative decimal integers is an error, and the call
-- writes nothing. A bucket expires when it is full again.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local cost = tonumber(ARGV[1])
local write = ARGV[2] == '0' and cost > 0
local n = #KEYS
local scaled, exists = {}, {}
local allowed = 1

local function int(v)
  return v and #v <= 16 and string.match(v, '^%d+$') and (v == '0' or string.sub(v, 1, 1) ~= '0')
end

for i = 1, n do
  local rate, period, cap = tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1]), tonumber(ARGV[3 * i + 2])
  local full = cap * period
  local s = full
  -- (a key of another type fails here with WRONGTYPE, before any write)
  local f = redis.call('HMGET', KEYS[i], 't', 's')
  if not (f[1] or f[2]) and redis.call('EXISTS', KEYS[i]) == 1 then
    f[1] = 'none' -- a hash of other fields: no bucket
  end
  if f[1] or f[2] then
    exists[i] = true
    if not (int(f[1]) and int(f[2])) or tonumber(f[2]) > full * 2 then
      return redis.error_reply('ERR limiter corrupt counter: the key of limit ' .. i .. ' holds no token bucket')
    end
    local last, tokens = tonumber(f[1]), tonumber(f[2])
    -- refill: R units per microsecond since the last refill, up to full
    -- (the elapsed time bounded first, so the product stays exact)
    local elapsed = math.min(math.max(now - last, 0), math.ceil(full / rate))
    s = math.min(full, tokens + elapsed * rate)
  end
  scaled[i] = s
  if cost > cap or s < cost * period then
    allowed = 0
  end
end

local out = {allowed}
for i = 1, n do
  local rate, period, cap = tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1]), tonumber(ARGV[3 * i + 2])
  local full = cap * period
  local s = scaled[i]
  if allowed == 1 and write then
    s = s - cost * period
  end
  -- microseconds until the bucket is full, rounded up to milliseconds
  local reset = math.floor((math.ceil((full - s) / rate) + 999) / 1000)
  if write and allowed == 1 then
    if s >= full then
      redis.call('DEL', KEYS[i])
    else
      -- the first write allocates, so Redis refuses the call under OOM
      redis.call('HSET', KEYS[i], 't', now, 's', s)
      redis.call('PEXPIRE', KEYS[i], reset)
    end
  elseif write and exists[i] then
    -- a denial keeps the bucket (refilled to now it is the same), but
    -- gives one found without its expiry, or with a longer one, its own
    local ttl = redis.call('PTTL', KEYS[i])
    if ttl == -1 or ttl > reset then
      redis.call('PEXPIRE', KEYS[i], math.max(reset, 1))
    end
  end
  local retry = 0
  if cost > cap then
    retry = -1
  elseif scaled[i] < cost * period then
    retry = math.max(1, math.floor((math.ceil((cost * period - scaled[i]) / rate) + 999) / 1000))
  end
  out[#out + 1] = math.floor(s / period)
  out[#out + 1] = reset
  out[#out + 1] = retry
end
return out
