-- Token bucket, several limits decided at once, all or nothing, on the
-- server's clock, in integers only.
--
-- KEYS[i]        bucket of limit i (all keys in one Cluster slot): the
--                string "<t>:<s>:<P>", t the time of the last refill in
--                microseconds since the Unix epoch, s the tokens scaled by
--                the period P in microseconds (a token is P units, and R
--                units come back every microsecond), decimal integers
-- ARGV[1]        cost, >= 0
-- ARGV[2]        "1": decide but write nothing (peek); "0": decide and write
-- ARGV[3i]       rate R of limit i (tokens per period)
-- ARGV[3i+1]     period P of limit i, in microseconds
-- ARGV[3i+2]     capacity (burst) B of limit i, in tokens
-- or, for a cost of 1 written (the common call: each argument costs the
-- server time), the limits' arguments alone: ARGV[3i-2], ARGV[3i-1] and
-- ARGV[3i]
--
-- Returns {allowed, remaining_1, reset_ms_1, retry_ms_1, remaining_2, ...}
-- (for one limit that admits, reset_ms * (B + 1) + remaining as one
-- integer when that is below 2^52):
-- remaining is the whole tokens left after the decision; reset_ms the time
-- until the bucket is full (0 when it is); retry_ms is 0 for a limit that
-- admits, -1 when the cost can never fit (cost > B), else the wait until
-- enough tokens have come back (at least 1).
--
-- Every product stays below 2^53 (the caller bounds B * P), so the
-- arithmetic is exact: no drift however long the bucket lives. Every
-- bucket is read and checked before anything is written: a key that is not
-- a string (WRONGTYPE) or not two non-negative decimal integers (the
-- tokens at most 2^51 units, the most any limit's bucket holds) is an
-- error, and the call writes nothing. A bucket written under another rule
-- for the same key is valid: it keeps its tokens (rescaled, rounded down,
-- when the period changed), capped at this limit's capacity. A bucket
-- without its period ("<t>:<s>") is read at this limit's. A bucket expires
-- when it is full again (a full bucket is deleted).
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
-- o: where the limits' arguments start (ARGV[o + 3i - 2] is limit i's
-- rate)
local o, cost, write = 0, 1, true
if #ARGV ~= 3 * #KEYS then
  o, cost = 2, tonumber(ARGV[1])
  write = ARGV[2] == '0' and cost > 0
end
local n = #KEYS

-- The common call, one limit that admits, without tables. Anything else
-- takes the general path below, which reuses the value read here (false:
-- no key; nil: not read).
local first
if n == 1 and write then
  local ps = ARGV[o + 2]
  local rate, period, cap = ARGV[o + 1] + 0, ps + 0, ARGV[o + 3] + 0
  local full = cap * period
  first = redis.call('GET', KEYS[1])
  local s = full
  local ok = not first
  if first then
    -- the common state: written under this limit's period (the checks
    -- come before any arithmetic on a field: miniredis's Lua reads a
    -- leading zero as octal)
    local a, b, p = string.match(first, '^([1-9]%d*):(%d+):(%d+)$')
    if p == ps and #a <= 16 and #b <= 16 and (b == '0' or string.byte(b) ~= 48) and b + 0 <= 2251799813685248 then
      ok = true
      -- refill (a product past 2^53 is far above full: clamped)
      local g = (now - a) * rate
      if g < 0 then
        g = 0
      end
      s = b + g
      if s > full then
        s = full
      end
    end
  end
  if ok and cost <= cap and s >= cost * period then
    s = s - cost * period
    local d = full - s
    local q = d % rate
    local us = (d - q) / rate
    if q > 0 then
      us = us + 1
    end
    q = (us + 999) % 1000
    local reset = (us + 999 - q) / 1000
    if s >= full then
      redis.call('DEL', KEYS[1])
    else
      redis.call('SET', KEYS[1], string.format('%d:%d:%s', now, s, ps), 'PX', reset)
    end
    -- {1, remaining, reset_ms, 0} as one integer when it fits below 2^52
    -- (no table to build): reset_ms * (B + 1) + remaining
    local remaining = (s - s % period) / period
    local v = reset * (cap + 1) + remaining
    if v < 4503599627370496 then
      return v
    end
    return {1, remaining, reset, 0}
  end
end

-- a decimal integer as written by this script: no sign, no leading zero
local function int(v)
  return #v <= 16 and (v == '0' or string.sub(v, 1, 1) ~= '0')
end

-- read returns a bucket's refill time and its tokens scaled by period, or
-- nil when v is not a bucket. Tokens scaled by another period are
-- rescaled, rounded down: whole tokens exactly, the fraction within one
-- unit (its product with the period could pass 2^53).
local function read(v, period)
  local a, b, p = string.match(v, '^(%d+):(%d+):(%d+)$')
  if not a then
    a, b = string.match(v, '^(%d+):(%d+)$')
    p = ''
  end
  if not (a and int(a) and int(b)) or tonumber(b) > 2251799813685248 then
    return nil
  end
  local s = tonumber(b)
  if p ~= '' then
    if not int(p) or p == '0' or tonumber(p) > 2678400000000 then
      return nil
    end
    p = tonumber(p)
    if p ~= period then
      local whole = math.floor(s / p)
      local frac = math.max(math.floor((s - whole * p) / p * period) - 1, 0)
      s = whole * period + frac
    end
  end
  return tonumber(a), s
end

local scaled, exists = {}, {}
local allowed = 1

for i = 1, n do
  local rate, period, cap = tonumber(ARGV[o - 2 + 3 * i]), tonumber(ARGV[o - 1 + 3 * i]), tonumber(ARGV[o + 3 * i])
  local full = cap * period
  local s = full
  local v = first
  if i > 1 or v == nil then
    v = redis.call('GET', KEYS[i])
  end
  if v then
    local a, b = read(v, period)
    if not a then
      return redis.error_reply('ERR limiter corrupt counter: the key of limit ' .. i .. ' holds no token bucket')
    end
    exists[i] = true
    -- refill: R units per microsecond since the last refill, up to full
    -- (the elapsed time bounded first, so the product stays exact)
    local elapsed = math.min(math.max(now - a, 0), math.ceil(full / rate))
    s = math.min(full, math.min(b, full) + elapsed * rate)
  end
  scaled[i] = s
  if cost > cap or s < cost * period then
    allowed = 0
  end
end

local out = {allowed}
for i = 1, n do
  local rate, period, cap = tonumber(ARGV[o - 2 + 3 * i]), tonumber(ARGV[o - 1 + 3 * i]), tonumber(ARGV[o + 3 * i])
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
      redis.call('SET', KEYS[i], string.format('%d:%d:%d', now, s, period), 'PX', reset)
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
