-- Generic cell rate algorithm (GCRA), several limits decided at once, all
-- or nothing, on the server's clock.
--
-- KEYS[i]        state of limit i (all keys in one Cluster slot): its
--                theoretical arrival time (TAT), in microseconds since the
--                Unix epoch, as a decimal integer
-- ARGV[1]        cost, >= 0
-- ARGV[2]        "1": decide but write nothing (peek); "0": decide and write
-- ARGV[1+2i]     emission interval of limit i (Period / Rate), in whole
--                microseconds, >= 1
-- ARGV[2+2i]     burst of limit i: the most cost admitted at once, >= 1
-- or, for a cost of 1 written (the common call: each argument costs the
-- server time), the limits' arguments alone: ARGV[2i-1] and ARGV[2i]
--
-- Returns {allowed, remaining_1, reset_ms_1, retry_ms_1, remaining_2, ...}
-- (for one limit that admits, reset_ms * (burst + 1) + remaining as one
-- integer when that is below 2^52):
-- allowed is 1 or 0 (for a peek: whether the cost would be admitted);
-- remaining is the cost that could be admitted at once after the decision;
-- reset_ms is the time until the limit is full again (0 when it is);
-- retry_ms is 0 for a limit that admits, -1 when the cost can never fit
-- (cost > burst), else the wait until it would fit (at least 1).
--
-- All arithmetic is on integers below 2^53 (the caller bounds
-- burst * interval), so it is exact in Lua's numbers: no drift however far
-- the TAT is from the epoch.
--
-- Every state is read and checked before anything is written: a key that
-- is not a string (WRONGTYPE) or whose value is not a positive decimal
-- integer of at most 16 digits is an error, and the call writes nothing.
-- A key lives until its limit is full again (PX), so an idle subject
-- leaves nothing behind; a writing call that is denied gives a key found
-- without that TTL its TTL back.
-- (Redis 5 and later replicate a script's effects, so writing after TIME
-- needs no redis.replicate_commands.)
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
-- o: where the limits' arguments start (ARGV[o + 2i - 1], ARGV[o + 2i])
local o, cost, write = 0, 1, true
if #ARGV ~= 2 * #KEYS then
  o, cost = 2, tonumber(ARGV[1])
  write = ARGV[2] == '0' and cost > 0
end

-- The common call, one limit that admits, without tables. Anything else
-- (a denial, a corrupt state, several limits) takes the general path below,
-- which reuses the value read here (false: no key; nil: not read).
local first
if #KEYS == 1 then
  local interval, burst = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2])
  local tat = now
  first = redis.call('GET', KEYS[1])
  local v = first
  if v and #v <= 16 and string.match(v, '^[1-9]%d*$') then
    tat = tonumber(v)
    if tat < now then
      tat = now
    elseif tat - now > burst * interval then
      tat = now + burst * interval
    end
  elseif v then
    tat = nil
  end
  if tat and cost <= burst and (tat - now) + cost * interval <= burst * interval then
    if write then
      tat = tat + cost * interval
      redis.call('SET', KEYS[1], tat, 'PX', math.floor((tat - now + 999) / 1000))
    end
    -- {1, remaining, reset_ms, 0} as one integer when it fits below
    -- 2^52 (no table to build): reset_ms * (burst + 1) + remaining
    local remaining = math.floor((burst * interval - (tat - now)) / interval)
    local reset = math.floor((tat - now + 999) / 1000)
    local v = reset * (burst + 1) + remaining
    if v < 4503599627370496 then
      return v
    end
    return {1, remaining, reset, 0}
  end
end
local n = #KEYS
local tats, news, exists, clamped = {}, {}, {}, {}
local allowed = 1

for i = 1, n do
  local interval = tonumber(ARGV[o - 1 + 2 * i])
  local burst = tonumber(ARGV[o + 2 * i])
  local tat = now
  local v = first
  if i > 1 or v == nil then
    v = redis.call('GET', KEYS[i])
  end
  if v then
    if #v > 16 or not string.match(v, '^[1-9]%d*$') then
      return redis.error_reply('ERR limiter corrupt counter: the key of limit ' .. i .. ' holds no GCRA state')
    end
    exists[i] = true
    tat = math.max(tonumber(v), now)
    -- A TAT further ahead than the whole burst (the limit was changed to
    -- a shorter period or a higher rate) counts as the burst used up:
    -- the new limit applies within one refill of it.
    if tat - now > burst * interval then
      tat = now + burst * interval
      clamped[i] = true
    end
  end
  tats[i] = tat
  news[i] = tat + cost * interval
  -- (tat - now and cost * interval are each at most burst * interval, so
  -- their sum is exact; tat + cost * interval may pass 2^53 near 2100)
  if cost > burst or (tat - now) + cost * interval > burst * interval then
    allowed = 0
  end
end

-- milliseconds from now until tat, rounded up, at least 1
local function until_ms(tat)
  return math.max(1, math.floor((tat - now + 999) / 1000))
end

if allowed == 1 and write then
  for i = 1, n do
    -- expires when the limit is full again
    redis.call('SET', KEYS[i], news[i], 'PX', until_ms(news[i]))
  end
elseif write then
  -- A denial writes no state, but repairs what it found: a TAT clamped
  -- above, and a key without a TTL (a leak from elsewhere) or with one
  -- longer than its state needs.
  for i = 1, n do
    if clamped[i] then
      redis.call('SET', KEYS[i], tats[i], 'PX', until_ms(tats[i]))
    elseif exists[i] then
      local ttl = redis.call('PTTL', KEYS[i])
      if ttl == -1 or ttl > until_ms(tats[i]) then
        redis.call('PEXPIRE', KEYS[i], until_ms(tats[i]))
      end
    end
  end
end

local out = {allowed}
for i = 1, n do
  local interval = tonumber(ARGV[o - 1 + 2 * i])
  local burst = tonumber(ARGV[o + 2 * i])
  local tat = tats[i]
  if allowed == 1 and write then
    tat = news[i]
  end
  local retry = 0
  if cost > burst then
    retry = -1
  elseif (tats[i] - now) + cost * interval > burst * interval then
    -- fits once the TAT has come within burst * interval of the clock
    retry = math.max(1, math.floor(((tats[i] - now) + cost * interval - burst * interval + 999) / 1000))
  end
  out[#out + 1] = math.floor((burst * interval - (tat - now)) / interval)
  out[#out + 1] = math.floor((tat - now + 999) / 1000)
  out[#out + 1] = retry
end
return out
