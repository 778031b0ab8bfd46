-- Token bucket, several limits decided at once, all or nothing, on the
-- server's clock, in integers only.
--
-- KEYS[i]        bucket of limit i (all keys in one Cluster slot), in one
--                of two forms, by the limit's interval Period/Rate (the
--                time one token takes to come back):
--   - an interval of whole milliseconds (10/s, 100/min: most limits):
--     "<d>/<R>/<P>/<B>", the limit's rate, period and capacity as its
--     arguments give them (its scale: the interval is P / R), the key's
--     expiry the time the bucket is full again, so that its PTTL is the
--     tokens missing times the interval, on the server's millisecond
--     clock: an admitted decision on a live bucket reads one PTTL and
--     moves the expiry with GETEX, which returns the value, checked after
--     the fact (a new bucket: PTTL and SET; no TIME, no GET); d bounds
--     what the bucket lacks, in ms, read only when the key has lost its
--     TTL: a new bucket's value is written with what it lacks, a bucket
--     whose bound no longer covers what it lacks gets twice that (at most
--     its capacity times the interval), and the value is kept while its
--     bound covers what the bucket lacks, so that it rarely changes;
--   - any other interval (3/s: a token every 333 333.3 us), on the same
--     clock: "<9 * 10^15 + px>:<s>:<P>", s the tokens when the bucket was
--     written, scaled by the period P in microseconds (a token is P units,
--     and R units come back every microsecond, 1000 R every millisecond),
--     px the TTL the key had when the bucket was written (at least the
--     time until it is full, rounded up to the millisecond), so that
--     px - PTTL is the time since, in whole milliseconds of the clock keys
--     expire by, and the bucket is exact to the unit: an admitted decision
--     reads one PTTL and one GET and writes one SET (a new key: PTTL and
--     SET; no TIME), which keeps the key's expiry (KEEPTTL) while it
--     covers the time until full and is no longer than the time to fill
--     from empty, and else sets twice the time until full, at most the
--     time to fill from empty (a new bucket: the time until full), so
--     that the expiry of a subject who keeps asking moves rarely. Scripts
--     before this form read it as a bucket last refilled in 2255: they
--     refill nothing until it expires, never admit more (the release
--     before that, which wrote the exact expiry, reads it exactly).
-- A third form, "<t>:<s>:<P>" with t the last refill in microseconds since
-- the Unix epoch (below 9 * 10^15), on TIME, is how scripts before the
-- second held a limit of any other interval: this script reads it (for
-- such a limit with 2 ms less refill: TIME's clock may run up to a
-- millisecond, and a moment, ahead of the one keys expire by) and writes
-- the second form.
-- ARGV[1]        cost, >= 0
-- ARGV[2]        "1": decide but write nothing (peek); "0": decide and write
-- ARGV[3i]       rate R of limit i (tokens per period)
-- ARGV[3i+1]     period P of limit i, in microseconds (whole milliseconds)
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
-- a string (WRONGTYPE) or holds no bucket in any form is an error, and
-- the call writes nothing. A bucket is decimal integers without a sign or
-- a leading zero: "<t>:<s>:<P>" with t and s of at most 16 digits, s at
-- most 2^51 (the most any limit's bucket holds) and P at most 31 days;
-- "<d>/<R>/<P>/<B>" of at most 80 characters, P at most 31 days, P / R
-- whole milliseconds and B at most 2^51. A bucket written under another
-- rule for the same key is valid: it keeps its tokens (rescaled when the
-- scale changed, never rounded up), capped at this limit's capacity, and a
-- call that writes stores it in this limit's form, denied or not (the same
-- tokens: a denial consumes nothing); the second and third forms refill at
-- the reading limit's rate, and one of the second is full once its key
-- expires (in its expiry millisecond: PTTL 0), when the rule that wrote
-- it had refilled it. A bucket of the second form found without its
-- TTL, or with a longer one than it was written with, is read as refilled
-- by nothing since. A bucket "<t>:<s>" without its
-- period is read at this limit's. A bucket of the first form expires when
-- it is full again, one of the second within the time to fill from empty
-- (a full bucket is deleted). GETEX makes this script need Redis 6.2.
-- On a live bucket of whole milliseconds an admitted decision's first
-- write moves an expiry (GETEX), which Redis allows when its memory is
-- full (noeviction refuses commands that may use memory, and lets a
-- script that has written go on: a bound rewritten after it too).

-- The globals the common call reads, read once: each read of a global is
-- a table lookup, paid again at every use (about 120 instructions).
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
