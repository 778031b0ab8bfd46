-- Several requests decided in one call, each as gcra.lua
-- decides it on its own: the code of gcra.lua, verbatim, is
-- the function decide below, run for each request in turn. (This file
-- is generated from that script: go test ./strategy -run
-- TestManyScripts -update.)
--
-- KEYS           the requests' keys, one request's after another's
-- ARGV           for each request in turn: its number of keys, its number
--                of arguments, then its arguments as gcra.lua
--                reads them; or its number of keys and -1, when its
--                arguments are those of the request before it (sent once)
--
-- Returns one element per request: gcra.lua's reply to it,
-- or the error it ends with (as an error reply in the array). A
-- request's error leaves what it wrote, as the script alone does, and the
-- requests after it are decided.

local function decide(KEYS, ARGV)
local KEYS, ARGV, redis, string = KEYS, ARGV, redis, string
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
    -- Whole milliseconds: PTTL is the state (TAT - now; no key: 0, and
    -- SET writes the new one). A live key's value is counted up by what
    -- the TAT moves (INCRBY: in place, and it refuses, before writing, a
    -- value that is not an integer string), then PEXPIRE moves the TAT; an
    -- integer that was no state of this form (a TAT in microseconds, or
    -- anything else) is taken back as it was and left to the general path.
    local t = interval / 1000
    local d = redis.call('PTTL', KEYS[1])
    if d ~= -1 then
      local live = d >= 0
      if not live then
        d = 0
      end
      local n = d + cost * t
      if cost <= burst and n <= burst * t then
        local ok = true
        if live then
          -- (every number passed as a string: Redis 7.0 formats a number
          -- argument as a double, %.17g, which costs more)
          local ct = string.format('%d', cost * t)
          local x = redis.call('INCRBY', KEYS[1], ct)
          if x - cost * t > 9000000000000000 and x < 9007199254740992 then
            redis.call('PEXPIRE', KEYS[1], string.format('%d', n))
          else
            redis.call('DECRBY', KEYS[1], ct)
            ok = false
          end
        else
          redis.call('SET', KEYS[1], string.format('%d', n + 9000000000000000), 'PX', string.format('%d', n))
        end
        -- {1, remaining, reset_ms, 0} as one integer when it fits below
        -- 2^52: reset_ms * (burst + 1) + remaining
        if ok then
          local remaining = burst * t - n
          remaining = (remaining - remaining % t) / t
          local v = n * (burst + 1) + remaining
          if v < 4503599627370496 then
            return v
          end
          return {1, remaining, n, 0}
        end
      end
    end
  else
    -- Any other interval, on the same clock: the key expires at the TAT
    -- rounded up to the millisecond, and its value carries the TAT's
    -- fraction of a millisecond (value = TAT, modulo 1000), so PTTL
    -- and the value give TAT - now to the microsecond. A live key's
    -- value is counted up by what the TAT moves (INCRBY, which refuses
    -- a value that is not an integer before writing), then PEXPIRE moves
    -- its expiry to the new TAT rounded up; a value of no state of this
    -- form is taken back as it was and left to the general path, as are
    -- a limit that might not fit (read with no fraction: within a
    -- millisecond of fitting, the general path decides it exactly).
    local ci = cost * interval
    local d = redis.call('PTTL', KEYS[1])
    -- n: TAT - now once written, in microseconds; reset: the milliseconds
    -- until the new TAT, rounded up (the new expiry)
    local n, reset
    if d >= 1 then
      -- (TAT - now is d * 1000 less the fraction, 0 to 999: a limit that
      -- may not fit with d * 1000 is left to the general path without a
      -- write, so that a denial writes nothing)
      if cost <= burst and d * 1000 + ci <= burst * interval then
        -- (the cost of 1 the common call sends no cost for: the interval
        -- as it came; else formatted, as below)
        local cs = o == 0 and ARGV[1] or string.format('%d', ci)
        local x = redis.call('INCRBY', KEYS[1], cs)
        local v = x - ci
        if v >= 8000000000000000 and x < 9000000000000000 then
          -- (the TAT lay (1000 - v % 1000) % 1000 us before the end of
          -- its expiry's millisecond, and lies (1000 - x % 1000) % 1000
          -- before the end of the new one's)
          n = d * 1000 - (1000 - v % 1000) % 1000 + ci
          reset = (n + (1000 - x % 1000) % 1000) / 1000
          redis.call('PEXPIRE', KEYS[1], string.format('%d', reset))
        else
          redis.call('DECRBY', KEYS[1], cs)
        end
      end
    elseif (d == -2 or d == 0) and cost <= burst and ci < 1000000000000000 then
      -- No key, or one expiring within this millisecond (d = 0) that holds
      -- a state of either millisecond form (16 digits from 8 or 9), whose
      -- TAT is then at most now: the TAT is now + cost * interval. (The
      -- 16-digit value formatted here: Redis 7.0 formats a number argument
      -- as a double, %.17g, which costs more.)
      local v = d == 0 and redis.call('GET', KEYS[1])
      if not v or (#v == 16 and string.find(v, '^[89]%d*$') and v + 0 < 9007199254740992) then
        n = ci
        reset = (ci + 999 - (ci + 999) % 1000) / 1000
        redis.call('SET', KEYS[1], string.format('%d', ci + 8000000000000000), 'PX', string.format('%d', reset))
      end
    end
    if n then
      -- {1, remaining, reset_ms, 0} as one integer when it fits below
      -- 2^52: reset_ms * (burst + 1) + remaining
      local remaining = burst * interval - n
      remaining = (remaining - remaining % interval) / interval
      local w = reset * (burst + 1) + remaining
      if w < 4503599627370496 then
        return w
      end
      return {1, remaining, reset, 0}
    end
  end
end

-- The general path: several limits, a denial (or a call that might be
-- one: within a millisecond of fitting), a peek, a key without a TTL, a
-- key in another form.
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
-- rel: TAT - now in microseconds (at least 0, at most burst * interval
-- plus the slack of a TAT read on the TIME clock),
-- on the millisecond clock
local rel, ms, exists, repair, ttls, epoch = {}, {}, {}, {}, {}, {}
local allowed = 1
for i = 1, n do
  local interval = tonumber(ARGV[o - 1 + 2 * i])
  local burst = tonumber(ARGV[o + 2 * i])
  ms[i] = interval % 1000 == 0
  local v = redis.call('GET', KEYS[i])
  -- slack: how much more than the state's TAT r may read (its form's
  -- rounding), which is no sign of a TAT beyond the burst
  local r, slack = 0, 0
  if v then
    if not valid(v) then
      return redis.error_reply('ERR limiter corrupt counter: the key of limit ' .. i .. ' holds no GCRA state')
    end
    exists[i] = true
    local d = redis.call('PTTL', KEYS[i])
    ttls[i] = d
    local x = tonumber(v)
    if x >= 9000000000000000 then
      -- the TAT is the expiry; no TTL: what was left when the state was
      -- written (at most)
      if d >= 0 then
        r = d * 1000
      else
        r = (x - 9000000000000000) * 1000
      end
    elseif x >= 8000000000000000 then
      -- the TAT is the expiry less the fraction the value carries; no
      -- TTL: what was left when the state was written (at most)
      if d >= 0 then
        r = math.max(d * 1000 - (1000 - x % 1000) % 1000, 0)
      else
        r = x - 8000000000000000
      end
      if ms[i] then
        r = math.ceil(r / 1000) * 1000
      end
    else
      -- a TAT in microseconds since the Unix epoch, as earlier releases
      -- wrote it, read on TIME's clock
      if ms[i] and d >= 0 then
        r = d * 1000
      elseif ms[i] then
        r = math.ceil(math.max(x - clock(), 0) / 1000) * 1000
      else
        -- (as much as 2 ms more: TIME's clock may be up to a millisecond,
        -- and a moment, ahead of the one keys expire by, which the state
        -- is written on)
        r = math.max(x - clock() + 1999, 0)
        slack = 1999
      end
      -- (the slack, taken out again when the TAT is written back on
      -- TIME's clock: otherwise each admission would move it by that
      -- much more)
      epoch[i] = slack
    end
    if d == -1 then
      repair[i] = true
    end
    -- A TAT further ahead than the whole burst (the limit was changed to
    -- a shorter period or a higher rate) counts as the burst used up:
    -- the new limit applies within one refill of it.
    -- (A TAT read with its slack may come out as much above the burst
    -- when the burst was used up: it is not clamped, so that RetryAfter
    -- keeps the slack, and not rewritten, which would move the TAT by it
    -- at each denial.)
    -- (A call that writes nothing reports the TAT as it is: no write
    -- brings it back, so the wait it reports is the one that holds; but
    -- a key without a TTL, whose TAT does not come nearer, as the next
    -- write will repair it.)
    if r > burst * interval + slack then
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
-- limit's form; slack is what r was read as more than the TAT, on TIME's
-- clock (0 on the other)
local function put(i, r, slack)
  if ms[i] then
    redis.call('SET', KEYS[i], string.format('%d', r / 1000 + 9000000000000000), 'PX', string.format('%d', r / 1000))
  elseif r < 1000000000000000 then
    redis.call('SET', KEYS[i], string.format('%d', r + 8000000000000000), 'PX', string.format('%d', math.ceil(r / 1000)))
  else
    -- (more than 31 years: a TAT since the Unix epoch)
    redis.call('SET', KEYS[i], string.format('%d', clock() + r - slack), 'PX', string.format('%d', math.ceil(r / 1000)))
  end
end

if write then
  for i = 1, n do
    local interval = tonumber(ARGV[o - 1 + 2 * i])
    if allowed == 1 then
      put(i, rel[i] + cost * interval, epoch[i] or 0)
    elseif repair[i] then
      -- A denial writes no state, but repairs what it found: a TAT
      -- clamped above, a key without a TTL (a leak from elsewhere); a
      -- TAT read with its slack is written back within the burst.
      if rel[i] > 0 then
        put(i, math.min(rel[i], tonumber(ARGV[o + 2 * i]) * interval), 0)
      else
        redis.call('PEXPIRE', KEYS[i], 1)
      end
    elseif epoch[i] and not ms[i] then
      -- a TTL longer than its state needs (as read above)
      if ttls[i] > math.max(1, math.ceil(rel[i] / 1000)) then
        redis.call('PEXPIRE', KEYS[i], string.format('%d', math.max(1, math.ceil(rel[i] / 1000))))
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
  out[#out + 1] = math.max(math.floor((burst * interval - r) / interval), 0)
  out[#out + 1] = math.ceil(r / 1000)
  out[#out + 1] = retry
end
return out
end

-- The tables decide reads as KEYS and ARGV are reused from request to
-- request (cut to the request's length; decide never writes to them), and
-- the counts are read by an addition, cheaper than tonumber: this loop's
-- cost is paid per request.
local keys, argv, out = KEYS, ARGV, {}
local k, a, n, j = 0, 1, #ARGV, 0
local ks, as, kn, an = {}, {}, 0, 0
while a <= n do
  local nk, na = argv[a] + 0, argv[a + 1] + 0
  for i = 1, nk do
    ks[i] = keys[k + i]
  end
  for i = nk + 1, kn do
    ks[i] = nil
  end
  k, a, kn = k + nk, a + 2, nk
  if na >= 0 then
    for i = 1, na do
      as[i] = argv[a - 1 + i]
    end
    for i = na + 1, an do
      as[i] = nil
    end
    a, an = a + na, na
  end
  local ok, r = pcall(decide, ks, as)
  if not ok and type(r) ~= 'table' then
    r = {err = tostring(r)} -- a Lua error, not a Redis one
  elseif r == nil then
    r = false -- a nil reply, kept in its place
  end
  j = j + 1
  out[j] = r
end
return out
