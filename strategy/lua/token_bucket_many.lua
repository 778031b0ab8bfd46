-- Several requests decided in one call, each as token_bucket.lua
-- decides it on its own: the code of token_bucket.lua, verbatim, is
-- the function decide below, run for each request in turn. (This file
-- is generated from that script: go test ./strategy -run
-- TestManyScripts -update.)
--
-- KEYS           the requests' keys, one request's after another's
-- ARGV           for each request in turn: its number of keys, its number
--                of arguments, then its arguments as token_bucket.lua
--                reads them; or its number of keys and -1, when its
--                arguments are those of the request before it (sent once)
--
-- Returns one element per request: token_bucket.lua's reply to it,
-- or the error it ends with (as an error reply in the array). A
-- request's error leaves what it wrote, as the script alone does, and the
-- requests after it are decided.

local function decide(KEYS, ARGV)
local KEYS, ARGV, redis, string = KEYS, ARGV, redis, string
-- o: where the limits' arguments start (ARGV[o + 3i - 2] is limit i's
-- rate)
local o, cost, write = 0, 1, true
if #ARGV ~= 3 * #KEYS then
  o, cost = 2, tonumber(ARGV[1])
  write = ARGV[2] == '0' and cost > 0
end
local n = #KEYS
-- the server's clock in microseconds, read once when needed
local now

-- The common call, one limit that admits, without tables. Anything else
-- takes the general path below, which reuses the value read here (false:
-- no key; nil: not read).
local first
if n == 1 and write then
  local ps = ARGV[o + 2]
  local rate, period, cap = ARGV[o + 1] + 0, ps + 0, ARGV[o + 3] + 0
  if period % (rate * 1000) == 0 then
    -- An interval of whole milliseconds: the bucket lacks PTTL / t tokens
    -- (none without a key).
    local t = period / (rate * 1000)
    -- (the limit's arguments as they came: no number to format)
    local tail = '/' .. ARGV[o + 1] .. '/' .. ps .. '/' .. ARGV[o + 3]
    -- PTTL is the state (-2 without a key: full). On a live key GETEX
    -- moves the expiry and returns the value, checked after the fact: a
    -- bucket of another scale or form, or no bucket at all, gets its TTL
    -- back, for the general path to read; a bucket of this scale whose
    -- bound no longer covers what it lacks gets a new one (SET KEEPTTL).
    -- A new key is one SET. (-1, no TTL: the general path reads the
    -- bound; 0, a key expiring within this millisecond: a TTL that could
    -- not be put back, so the general path too.)
    local d = redis.call('PTTL', KEYS[1])
    if d ~= -1 and d ~= 0 then
      local live = d > 0
      if not live then
        d = 0
      end
      local m = d + cost * t
      local full = cap * t
      if cost <= cap and m <= full then
        local sm = string.format('%d', m)
        local ok = true
        if live then
          local old = redis.call('GETEX', KEYS[1], 'PX', sm)
          local a, rest
          if #old <= 80 then
            a, rest = string.match(old, '^([1-9]%d*)(/.*)$')
          end
          if rest == tail and #a <= 16 then
            if a + 0 < m then
              -- a new bound: twice what the bucket lacks, at most full,
              -- so that a bucket that goes on lacking more is written
              -- again rarely
              local bound = m + m
              if bound > full then
                bound = full
              end
              redis.call('SET', KEYS[1], string.format('%d', bound) .. tail, 'KEEPTTL')
            end
          else
            redis.call('PEXPIRE', KEYS[1], string.format('%d', d))
            first = old
            ok = false
          end
        else
          redis.call('SET', KEYS[1], sm .. tail, 'PX', sm)
        end
        if ok then
          local remaining = full - m
          remaining = (remaining - remaining % t) / t
          local v = m * (cap + 1) + remaining
          if v < 4503599627370496 then
            return v
          end
          return {1, remaining, m, 0}
        end
      end
    end
  else
    -- Any other interval, on the same clock: "<9*10^15 + px>:<s>:<P>",
    -- the bucket held s tokens (scaled by P) when it was written with an
    -- expiry px ms ahead, so px - PTTL is the time since, in whole ms of
    -- the clock keys expire by (no TIME). GET reads it; anything but a
    -- bucket of this form and period, or a TTL longer than it was written
    -- with, is left to the general path (so is an empty bucket, "0" tokens:
    -- the pattern admits no leading zero, and the general path reads it;
    -- and a key expiring within this millisecond, PTTL 0, full by then).
    local full = cap * period
    local d = redis.call('PTTL', KEYS[1])
    local s = full
    local ok = d == -2
    if d > 0 then
      first = redis.call('GET', KEYS[1])
      local a, b, p = string.match(first, '^(9%d+):([1-9]%d*):(%d+)$')
      if p == ps and #a == 16 and #b <= 16 then
        -- (each string to number conversion is a strtod: b's made once)
        b = b + 0
        local e = a - 9000000000000000 - d
        if e >= 0 and b <= 2251799813685248 then
          ok = true
          -- refill: R units per microsecond, 1000 R per millisecond (a
          -- product past 2^53 is far above full: clamped)
          s = b + e * 1000 * rate
          if s > full then
            s = full
          end
        end
      end
    elseif d == -2 then
      first = false
    end
    if ok and cost <= cap and s >= cost * period then
      s = s - cost * period
      -- the key expires when the bucket is full again, rounded up to the
      -- millisecond (s < full: the cost is at least 1)
      local m = full - s
      local u = 1000 * rate
      local q = m % u
      local reset = (m - q) / u
      if q > 0 then
        reset = reset + 1
      end
      -- A bucket found keeps its expiry while that covers the time until
      -- full, within the time to fill from empty (f): the SET moves no
      -- expiry (KEEPTTL, cheaper), and its value records the TTL it has
      -- (d); else its expiry becomes twice the time until full, at most
      -- f. A new bucket's is the time until full.
      -- (the expiry passed as a string too: Redis 7.0 formats a number
      -- argument as a double, %.17g, which costs more)
      if d >= 0 then
        local f = full % u
        local px = (full - f) / u
        if f > 0 then
          px = px + 1
        end
        if d >= reset and d <= px then
          redis.call('SET', KEYS[1], string.format('%d:%d:%s', d + 9000000000000000, s, ps), 'KEEPTTL')
        else
          if reset + reset < px then
            px = reset + reset
          end
          redis.call('SET', KEYS[1], string.format('%d:%d:%s', px + 9000000000000000, s, ps), 'PX', string.format('%d', px))
        end
      else
        redis.call('SET', KEYS[1], string.format('%d:%d:%s', reset + 9000000000000000, s, ps), 'PX', string.format('%d', reset))
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
end

-- The general path: several limits, a denial, a peek, a key without a
-- TTL, a bucket in another form or of another scale.
local function clock()
  if not now then
    local c = redis.call('TIME')
    now = c[1] * 1000000 + c[2]
  end
  return now
end

-- a decimal integer as written by this script: no sign, no leading zero
local function int(v)
  return #v <= 16 and (v == '0' or string.sub(v, 1, 1) ~= '0')
end

-- read returns a bucket "<t>:<s>:<P>" or "<t>:<s>"'s refill time and its
-- tokens scaled by period, or nil when v is no such bucket. Tokens scaled
-- by another period are rescaled, rounded down: whole tokens exactly, the
-- fraction within one unit (its product with the period could pass 2^53).
-- own: the bucket is in this limit's scale.
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
  local own = false
  if p ~= '' then
    if not int(p) or p == '0' or tonumber(p) > 2678400000000 then
      return nil
    end
    p = tonumber(p)
    own = p == period
    if not own then
      local whole = math.floor(s / p)
      local frac = math.max(math.floor((s - whole * p) / p * period) - 1, 0)
      s = whole * period + frac
    end
  end
  return tonumber(a), s, own
end

-- readms returns a bucket "<d>/<R>/<P>/<B>"'s d, its interval P / R in
-- ms and B, or nil when v is no such bucket; own: its R, P and B are this
-- limit's arguments.
local function readms(v, k)
  if #v > 80 then
    return nil
  end
  local d, r, p, b = string.match(v, '^([1-9]%d*)/([1-9]%d*)/([1-9]%d*)/([1-9]%d*)$')
  if not d or #p > 13 or #b > 16 or tonumber(p) > 2678400000000 or tonumber(b) > 2251799813685248 or #r > 16 then
    return nil
  end
  r, p = tonumber(r), tonumber(p)
  if p % (r * 1000) ~= 0 then
    return nil
  end
  local own = r == tonumber(ARGV[k - 2]) and p == tonumber(ARGV[k - 1]) and b == ARGV[k]
  return tonumber(d), p / (r * 1000), tonumber(b), own
end

-- tillfull returns the milliseconds until a bucket of this script's
-- second form that lacks m units, refilled by rate units per microsecond,
-- is full: m / (1000 rate) rounded up (whole m >= 0), its key's expiry.
local function tillfull(m, rate)
  local u = 1000 * rate
  local q = m % u
  return (m - q) / u + math.min(q, 1)
end

-- down returns x * k / i rounded down, for whole x < i and k, i at most
-- 2^51 (within one below it when x * k passes 2^53).
local function down(x, i, k)
  if k == i then
    return x
  end
  local p = x * k
  if p < 9007199254740992 then
    return (p - p % i) / i
  end
  return math.max(math.floor(p / i) - 1, 0)
end

-- tokens returns what a bucket of a token every i ms and capacity B,
-- missing d ms, holds: its whole tokens w (B - d / i rounded down, at
-- least 0) and the fraction of the next one, r / i of a token
-- (0 <= r < i).
local function tokens(d, i, b)
  if d >= b * i then
    return 0, 0
  end
  local m = math.floor(d / i)
  local r = d - m * i
  if r < 0 then
    m, r = m - 1, r + i
  elseif r >= i then
    m, r = m + 1, r - i
  end
  if r > 0 then
    return b - m - 1, i - r
  end
  return b - m, 0
end

-- per limit: ms[i] its interval in milliseconds when whole (else false);
-- x[i] the milliseconds until its bucket is full (ms form) or the tokens
-- scaled by its period (else), at the time of the decision
-- seen[i] whether a value was found; keep[i] the bound of a bucket of
-- this limit's scale found with its TTL; held[i] the TTL of a bucket of
-- the second form and this limit's period found with a TTL no longer
-- than it was written with
-- late[i] and fullin[i]: for a call that writes nothing, the wait until
-- the cost fits and the time until full of a bucket of another scale, as
-- it refills at its own (see below)
-- gone[i]: for a call that writes nothing, the TTL of a bucket of the
-- second form (see below)
local ms, x, redo, seen, keep, held, late, fullin, gone = {}, {}, {}, {}, {}, {}, {}, {}, {}
local allowed = 1
for i = 1, n do
  local rate, period, cap = tonumber(ARGV[o - 2 + 3 * i]), tonumber(ARGV[o - 1 + 3 * i]), tonumber(ARGV[o + 3 * i])
  local full = cap * period
  local t = false
  if period % (rate * 1000) == 0 then
    t = period / (rate * 1000)
  end
  ms[i] = t
  local v = first
  if i > 1 or v == nil then
    v = redis.call('GET', KEYS[i])
  end
  -- lack: the bucket's missing tokens, as ms (t) or as scaled units
  local lack = 0
  if v then
    seen[i] = true
    local d, b, c, own = readms(v, o + 3 * i)
    if d then
      local ttl = redis.call('PTTL', KEYS[i])
      if ttl == -1 then
        -- no TTL: at most the bound the value holds
        redo[i] = true
      else
        if own then
          keep[i] = d
        end
        d = math.max(ttl, 0)
      end
      if own then
        lack = d
      else
        -- another scale: its tokens, rescaled (rounded down) and capped
        local w, r = tokens(d, b, c)
        if w >= cap then
          lack = 0
        elseif t then
          lack = (cap - w) * t - down(r, b, t)
        else
          lack = (cap - w) * period - down(r, b, period)
        end
        redo[i] = true
        if not write and ttl >= 0 then
          -- A call that writes nothing reports the bucket as it is: until
          -- a write stores it at this limit's scale, it refills at its
          -- own, a token every b ms, and is full when its key expires (d
          -- ms). Rescaled, it holds its whole tokens, capped: the cost
          -- fits once it holds cost whole tokens (one more than it can
          -- hold: once it has expired).
          if cost <= c then
            late[i] = math.max(d - (c - cost) * b, 0)
          else
            late[i] = d + 1
          end
          fullin[i] = math.max(d - math.max(c - cap, 0) * b, 0)
        end
      end
    else
      local a, s, own = read(v, period)
      if not a then
        return redis.error_reply('ERR limiter corrupt counter: the key of limit ' .. i .. ' holds no token bucket')
      end
      if a >= 9000000000000000 then
        -- on the millisecond clock: s tokens when written with an expiry
        -- a - 9 * 10^15 ms ahead, refilled since (none for a key without
        -- its TTL or with a longer one)
        local ttl = redis.call('PTTL', KEYS[i])
        local e = a - 9000000000000000 - ttl
        if ttl == -1 or e < 0 then
          e = 0
          redo[i] = true
        elseif own then
          held[i] = ttl
        end
        s = math.min(full, math.min(s, full) + e * 1000 * rate)
        if ttl == 0 then
          -- expiring within this millisecond: full, as once it has
          -- expired (the rule that wrote it filled it by then)
          s = full
        end
        if not own then
          redo[i] = true
        end
        if not write and ttl > 0 then
          -- A call that writes nothing reports the bucket as it is: it
          -- refills at this limit's rate until its key expires, at the
          -- time until full of the rule that wrote it (a faster rate, a
          -- lower burst: sooner than at this limit's), and is full then.
          gone[i] = ttl
        end
        if not t then
          -- a TTL shorter than the time until full, or longer than the
          -- time to fill from empty (another rate, a lower burst), is
          -- repaired
          if ttl < tillfull(full - s, rate) or ttl > tillfull(full, rate) then
            redo[i] = true
          end
        end
      else
        -- on TIME, as earlier releases wrote every bucket of this form:
        -- refill R units per microsecond since the last refill, up to
        -- full (the elapsed time bounded first, so the product stays
        -- exact)
        local elapsed = math.min(math.max(clock() - a, 0), math.ceil(full / rate))
        s = math.min(full, math.min(s, full) + elapsed * rate)
        redo[i] = true
        if not t then
          -- read as of the millisecond clock's now, which TIME's may be
          -- up to a millisecond, and a moment, ahead of: 2 ms less refill
          s = math.max(s - 2000 * rate, 0)
        end
      end
      if t then
        -- microseconds until full, then milliseconds, rounded up
        lack = math.ceil(math.ceil((full - s) / rate) / 1000)
        redo[i] = true
      else
        lack = full - s
      end
    end
  end
  if t then
    -- a bucket of this scale that lacks more than its capacity (a TTL
    -- longer than its state needs, or one found without a TTL) is empty;
    -- the conversions above never lack more
    if lack > cap * t then
      lack = cap * t
      redo[i] = true
    end
    x[i] = lack
    if cost > cap or lack + cost * t > cap * t then
      allowed = 0
    end
  else
    -- (lack is at most full here: read caps the tokens at full, and a
    -- bucket of the other form lacks at most (cap - w) * period)
    x[i] = full - lack
    if cost > cap or x[i] < cost * period then
      allowed = 0
    end
  end
end

local out = {allowed}
for i = 1, n do
  local rate, period, cap = tonumber(ARGV[o - 2 + 3 * i]), tonumber(ARGV[o - 1 + 3 * i]), tonumber(ARGV[o + 3 * i])
  local t = ms[i]
  local take = 0
  if allowed == 1 and write then
    take = cost
  end
  local remaining, reset, retry = 0, 0, 0
  if t then
    local m = x[i] + take * t
    remaining = math.floor((cap * t - m) / t)
    reset = m
    if write and (take > 0 or redo[i]) then
      if m > 0 and keep[i] and keep[i] >= m then
        -- the value still bounds what the bucket lacks: kept
        redis.call('PEXPIRE', KEYS[i], string.format('%d', m))
      elseif m > 0 then
        -- a new bucket's bound is what it lacks; a new bound for a bucket
        -- found is twice that, at most full (see the common call)
        local bound = m
        if seen[i] then
          bound = math.min(m + m, cap * t)
        end
        redis.call('SET', KEYS[i], string.format('%d', bound) .. '/' .. ARGV[o - 2 + 3 * i] .. '/' .. ARGV[o - 1 + 3 * i] .. '/' .. ARGV[o + 3 * i], 'PX', string.format('%d', m))
      else
        redis.call('DEL', KEYS[i])
      end
    end
    if cost > cap then
      retry = -1
    elseif x[i] + cost * t > cap * t then
      retry = x[i] + cost * t - cap * t
    end
  else
    local full = cap * period
    local s = x[i] - take * period
    reset = tillfull(full - s, rate)
    remaining = math.floor(s / period)
    if write and (take > 0 or redo[i]) then
      local h, f = held[i], tillfull(full, rate)
      if s >= full then
        redis.call('DEL', KEYS[i])
      elseif h and h >= reset and h <= f then
        -- the expiry it has covers the time until full: kept (see the
        -- common call)
        redis.call('SET', KEYS[i], string.format('%d:%d:%d', h + 9000000000000000, s, period), 'KEEPTTL')
      else
        -- a bucket found: twice the time until full, at most f
        local px = reset
        if h then
          px = math.min(reset + reset, f)
        end
        redis.call('SET', KEYS[i], string.format('%d:%d:%d', px + 9000000000000000, s, period), 'PX', string.format('%d', px))
      end
    end
    if cost > cap then
      retry = -1
    elseif x[i] < cost * period then
      retry = math.max(1, math.floor((math.ceil((cost * period - x[i]) / rate) + 999) / 1000))
    end
  end
  if late[i] then
    reset = fullin[i]
    if retry > 0 then
      retry = math.max(late[i], 1)
    end
  elseif gone[i] then
    reset = math.min(reset, gone[i])
    if retry > 0 then
      retry = math.min(retry, gone[i])
    end
  end
  out[#out + 1] = remaining
  out[#out + 1] = reset
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
