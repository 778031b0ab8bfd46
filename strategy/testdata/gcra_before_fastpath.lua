-- Generic cell rate algorithm (GCRA), several limits decided at once, all
-- or nothing, on the server's clock.
--
-- KEYS[i]        state of limit i (all keys in one Cluster slot), below
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
-- The state of a limit is its theoretical arrival time (TAT): the limit is
-- full again at the TAT, and admits a cost c at time t when
-- max(TAT, t) + c * interval <= t + burst * interval. A key lives until
-- its TAT (PX), so an idle subject leaves nothing behind. It is held in one
-- of two ways, by the limit's interval:
--   - an interval of whole milliseconds (10/s, 100/min: most limits): the
--     key's expiry is the TAT, on the server's millisecond clock, so its
--     PTTL is TAT - now, and a decision reads one PTTL and writes one SET
--     (no TIME, no GET). The key holds 9 * 10^15 + TAT - now as written
--     (in milliseconds), read only when the key has lost its TTL. (Read as
--     a TAT in microseconds, as scripts before this form did, it is a date
--     past 2255: such a script finds the burst used up and denies, never
--     admits more.)
--   - any other interval: the key holds the TAT in microseconds since the
--     Unix epoch (a decimal below 9 * 10^15), its TTL the time until it
--     rounded up to the millisecond, and the clock is TIME.
-- A limit whose interval changed (a new rate) finds the other form; each
-- reads it as a TAT to within a millisecond of the one written (its TTL,
-- or, for a key that lost its TTL, the time that was left when it was
-- written).
--
-- All arithmetic is on integers below 2^53 (the caller bounds
-- burst * interval), so it is exact in Lua's numbers: no drift however far
-- the TAT is from the epoch.
--
-- Every state is read and checked before anything is written: a key that
-- is not a string (WRONGTYPE) or whose value is not a positive decimal
-- integer of at most 16 digits is an error, and the call leaves every key
-- as it found it. A writing call that is denied gives a key found without
-- a TTL its TTL back. SET's GET option makes this script need Redis 6.2.
-- (Redis 5 and later replicate a script's effects, so writing after TIME
-- needs no redis.replicate_commands.)

-- o: where the limits' arguments start (ARGV[o + 2i - 1], ARGV[o + 2i])
local o, cost, write = 0, 1, true
if #ARGV ~= 2 * #KEYS then
  o, cost = 2, tonumber(ARGV[1])
  write = ARGV[2] == '0' and cost > 0
end

-- The common calls: one limit, a write that admits. Anything else (a
-- denial, a corrupt state, a key without a TTL, several limits) takes the
-- general path below.
local now
if #KEYS == 1 and write then
  local interval, burst = ARGV[o + 1] + 0, ARGV[o + 2] + 0
  if interval % 1000 == 0 then
    -- Whole milliseconds: PTTL is the state (TAT - now, 0 without a key);
    -- SET writes the new one and returns the old value, checked after the
    -- fact: a value that is no state is put back as it was, with its TTL,
    -- and reported.
    local t = interval / 1000
    local d = redis.call('PTTL', KEYS[1])
    if d ~= -1 then
      if d < 0 then
        d = 0
      end
      local n = d + cost * t
      if cost <= burst and n <= burst * t then
        local old = redis.call('SET', KEYS[1], n + 9000000000000000, 'PX', n, 'GET')
        if old and not (#old <= 16 and string.match(old, '^[1-9]%d*$')) then
          redis.call('SET', KEYS[1], old, 'PX', math.max(d, 1))
          return redis.error_reply('ERR limiter corrupt counter: the key of limit 1 holds no GCRA state')
        end
        -- {1, remaining, reset_ms, 0} as one integer when it fits below
        -- 2^52: reset_ms * (burst + 1) + remaining
        local remaining = math.floor((burst * t - n) / t)
        local v = n * (burst + 1) + remaining
        if v < 4503599627370496 then
          return v
        end
        return {1, remaining, n, 0}
      end
    end
  else
    -- Microseconds: TIME and the TAT.
    local c = redis.call('TIME')
    now = c[1] * 1000000 + c[2]
    local v = redis.call('GET', KEYS[1])
    if not v or (#v <= 16 and string.match(v, '^[1-9]%d*$') and v + 0 < 9000000000000000) then
      local r = 0
      if v then
        r = math.max(v - now, 0)
      end
      local n = r + cost * interval
      if cost <= burst and n <= burst * interval then
        redis.call('SET', KEYS[1], now + n, 'PX', math.ceil(n / 1000))
        local remaining = math.floor((burst * interval - n) / interval)
        local reset = math.ceil(n / 1000)
        local v = reset * (burst + 1) + remaining
        if v < 4503599627370496 then
          return v
        end
        return {1, remaining, reset, 0}
      end
    end
  end
end

-- The general path: several limits, a denial, a peek, a key without a
-- TTL, a key in the other form.
-- the server's clock in microseconds, read once when needed
local function clock()
  if not now then
    local t = redis.call('TIME')
    now = t[1] * 1000000 + t[2]
  end
  return now
end

-- a state as this script writes it
local function valid(v)
  return #v <= 16 and string.match(v, '^[1-9]%d*$')
end

local n = #KEYS
-- rel: TAT - now in microseconds (at least 0, at most burst * interval),
-- by the limit's own clock
local rel, ms, exists, repair, ttls = {}, {}, {}, {}, {}
local allowed = 1
for i = 1, n do
  local interval = tonumber(ARGV[o - 1 + 2 * i])
  local burst = tonumber(ARGV[o + 2 * i])
  ms[i] = interval % 1000 == 0
  local v = redis.call('GET', KEYS[i])
  local r = 0
  if v then
    if not valid(v) then
      return redis.error_reply('ERR limiter corrupt counter: the key of limit ' .. i .. ' holds no GCRA state')
    end
    exists[i] = true
    local d = redis.call('PTTL', KEYS[i])
    ttls[i] = d
    local x = tonumber(v)
    if x < 9000000000000000 then
      -- a TAT in microseconds
      if ms[i] and d >= 0 then
        r = d * 1000
      else
        r = math.max(x - clock(), 0)
        if ms[i] then
          r = math.ceil(r / 1000) * 1000
        end
      end
    elseif d >= 0 then
      -- the TAT is the expiry; read on TIME's clock, which may be up to
      -- a millisecond behind PTTL's
      r = d * 1000
      if not ms[i] then
        r = r + 999
      end
    else
      -- no TTL: what was left when the state was written
      r = (x - 9000000000000000) * 1000
    end
    if d == -1 then
      repair[i] = true
    end
    -- A TAT further ahead than the whole burst (the limit was changed to
    -- a shorter period or a higher rate) counts as the burst used up:
    -- the new limit applies within one refill of it. (A call that writes
    -- nothing reports the TAT as it is.)
    if r > burst * interval then
      if write or d == -1 then
        r = burst * interval
      end
      repair[i] = true
    end
  end
  rel[i] = r
  if cost > burst or r + cost * interval > burst * interval then
    allowed = 0
  end
end

-- put writes limit i's state, TAT - now = r microseconds (r > 0), in its
-- limit's form
local function put(i, r)
  if ms[i] then
    redis.call('SET', KEYS[i], r / 1000 + 9000000000000000, 'PX', r / 1000)
  else
    redis.call('SET', KEYS[i], clock() + r, 'PX', math.ceil(r / 1000))
  end
end

if write then
  for i = 1, n do
    local interval = tonumber(ARGV[o - 1 + 2 * i])
    if allowed == 1 then
      put(i, rel[i] + cost * interval)
    elseif repair[i] then
      -- A denial writes no state, but repairs what it found: a TAT
      -- clamped above, a key without a TTL (a leak from elsewhere).
      if rel[i] > 0 then
        put(i, rel[i])
      else
        redis.call('PEXPIRE', KEYS[i], 1)
      end
    elseif exists[i] and not ms[i] then
      -- a TTL longer than its state needs (as read above)
      if ttls[i] > math.max(1, math.ceil(rel[i] / 1000)) then
        redis.call('PEXPIRE', KEYS[i], math.max(1, math.ceil(rel[i] / 1000)))
      end
    end
  end
end

local out = {allowed}
for i = 1, n do
  local interval = tonumber(ARGV[o - 1 + 2 * i])
  local burst = tonumber(ARGV[o + 2 * i])
  local r = rel[i]
  if allowed == 1 and write then
    r = r + cost * interval
  end
  local retry = 0
  if cost > burst then
    retry = -1
  elseif rel[i] + cost * interval > burst * interval then
    -- fits once the TAT has come within burst * interval of the clock
    retry = math.max(1, math.ceil((rel[i] + cost * interval - burst * interval) / 1000))
  end
  -- (at least 0: a peek reads a TAT beyond the burst as it is)
  out[#out + 1] = math.max(math.floor((burst * interval - r) / interval), 0)
  out[#out + 1] = math.ceil(r / 1000)
  out[#out + 1] = retry
end
return out
