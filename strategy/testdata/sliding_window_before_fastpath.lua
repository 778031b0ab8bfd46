-- Sliding window counter, several limits decided at once, all or nothing,
-- on the server's clock, in integers only.
--
-- KEYS[i]        state of limit i (all keys in one Cluster slot), the
--                string "<start>:<count>:<previous>": the start of the
--                current window in milliseconds since the Unix epoch, the
--                cost admitted in it, and the cost admitted in the window
--                before it
-- ARGV[1]        cost, >= 0
-- ARGV[2]        "1": decide but write nothing (peek); "0": decide and write
-- ARGV[1+2i]     rate R of limit i
-- ARGV[2+2i]     period P of limit i, in milliseconds (R * P <= 2^51)
-- or, for a cost of 1 written (the common call: each argument costs the
-- server time), the limits' arguments alone: ARGV[2i-1] and ARGV[2i]
--
-- A window starts with the first request of an idle limit and lasts P;
-- the next one starts where it ends. At e milliseconds into a window the
-- previous window's count weighs (P - e) / P, so a request of cost n is
-- admitted when
--     (count + n) * P + previous * (P - e) <= R * P,
-- compared in integers (every product below 2^53).
--
-- Returns {allowed, remaining_1, reset_ms_1, retry_ms_1, remaining_2, ...}
-- (for one limit that admits, reset_ms * (R + 1) + remaining as one
-- integer when that is below 2^52):
-- remaining is the cost that fits after the decision; reset_ms the time
-- until the weighted count is zero (0 when it is); retry_ms is 0 for a
-- limit that admits, -1 when the cost can never fit (cost > R), else the
-- wait until it would fit (at least 1).
--
-- Every state is read and checked before anything is written: a key that
-- is not a string (WRONGTYPE) or not three decimal integers is an error,
-- and the call writes nothing. A state expires when its weighted count is
-- zero: at the end of the window after the one it last counted in.
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
-- o: where the limits' arguments start (ARGV[o + 2i - 1], ARGV[o + 2i])
local o, cost, write = 0, 1, true
if #ARGV ~= 2 * #KEYS then
  o, cost = 2, tonumber(ARGV[1])
  write = ARGV[2] == '0' and cost > 0
end
local n = #KEYS

-- The common call, one limit whose state is fresh or plain and that
-- admits, without tables. Anything else takes the general path below,
-- which reuses the value read here (false: no key; nil: not read).
local first
if n == 1 and write then
  local rate, period = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2])
  first = redis.call('GET', KEYS[1])
  local s, c, p = now, 0, 0
  local ok = not first
  if first then
    local a, b, d = string.match(first, '^([1-9]%d*):(%d+):(%d+)$')
    -- (counts of at most 15 digits without a leading zero; anything else
    -- is left to the general path's checks)
    if a and #a <= 16 and #b <= 15 and #d <= 15 and (#b == 1 or string.sub(b, 1, 1) ~= '0') and (#d == 1 or string.sub(d, 1, 1) ~= '0') then
      s, c, p = tonumber(a), tonumber(b), tonumber(d)
      ok = s <= now
      if now - s >= 2 * period then
        s, c, p = now, 0, 0
      elseif now - s >= period then
        p = c
        c = 0
        s = s + period
      end
    end
  end
  if ok and cost <= rate and (c + cost) * period + p * (period - (now - s)) <= rate * period then
    c = c + cost
    local reset = s + 2 * period - now
    redis.call('SET', KEYS[1], string.format('%d:%d:%d', s, c, p), 'PX', reset)
    -- {1, remaining, reset_ms, 0} as one integer when it fits below 2^52
    -- (no table to build): reset_ms * (R + 1) + remaining
    local remaining = math.floor((rate * period - c * period - p * (period - (now - s))) / period)
    local v = reset * (rate + 1) + remaining
    if v < 4503599627370496 then
      return v
    end
    return {1, remaining, reset, 0}
  end
end

local starts, counts, prevs, exists = {}, {}, {}, {}
local allowed = 1

local function num(s)
  if #s > 16 or (#s > 1 and string.sub(s, 1, 1) == '0') then
    return nil
  end
  local v = tonumber(s)
  if v > 9007199254740991 then
    return nil
  end
  return v
end

-- floor(a / b) of non-negative integers, exact
local function div(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  end
  return q
end

for i = 1, n do
  local rate, period = tonumber(ARGV[o - 1 + 2 * i]), tonumber(ARGV[o + 2 * i])
  local s, c, p = now, 0, 0
  local v = first
  if i > 1 or v == nil then
    v = redis.call('GET', KEYS[i])
  end
  if v then
    local a, b, d = string.match(v, '^(%d+):(%d+):(%d+)$')
    if a then
      a = num(a)
      b = num(b)
      d = num(d)
    end
    if not (a and b and d) then
      return redis.error_reply('ERR limiter corrupt counter: the key of limit ' .. i .. ' holds no sliding window')
    end
    exists[i] = true
    s, c, p = a, b, d
    -- A window start ahead of the clock (written by a server whose clock
    -- ran ahead: a failover) starts now, its counts kept: the key's TTL,
    -- s + 2 * period - now, stays within two periods, and no denial waits
    -- for a start that may be days ahead.
    if s > now then
      s = now
    end
    if now - s >= 2 * period then
      s, c, p = now, 0, 0
    elseif now - s >= period then
      -- (one assignment each: gopher-lua, miniredis' Lua, may assign a
      -- multiple assignment's targets before it reads all its values)
      p = c
      c = 0
      s = s + period
    end
  end
  starts[i], counts[i], prevs[i] = s, c, p
  local e = math.max(now - s, 0)
  if cost > rate or (c + cost) * period + p * (period - e) > rate * period then
    allowed = 0
  end
end

local out = {allowed}
for i = 1, n do
  local rate, period = tonumber(ARGV[o - 1 + 2 * i]), tonumber(ARGV[o + 2 * i])
  local s, c, p = starts[i], counts[i], prevs[i]
  local e = math.max(now - s, 0)
  local retry = 0
  if cost > rate then
    retry = -1
  elseif c + cost > rate then
    -- fits in the next window once the count carried into it weighs
    -- little enough: c * (P - e') <= (R - cost) * P
    local e2 = period - div((rate - cost) * period, c)
    retry = s + period - now + math.max(e2, 0)
  elseif (c + cost) * period + p * (period - e) > rate * period then
    -- fits later in this window: p * (P - e') <= (R - c - cost) * P
    retry = s + period - div((rate - c - cost) * period, p) - now
  end
  if allowed == 1 and write then
    c = c + cost
  end
  -- until the weighted count is zero
  local reset = 0
  if c > 0 then
    reset = s + 2 * period - now
  elseif p > 0 then
    reset = s + period - now
  end
  if allowed == 1 and write then
    redis.call('SET', KEYS[i], string.format('%d:%d:%d', s, c, p), 'PX', reset)
  elseif write and exists[i] then
    -- a denial keeps the state (advanced to now it is the same), but
    -- gives one found without its expiry, or with a longer one, its own
    if reset <= 0 then
      redis.call('DEL', KEYS[i])
    else
      local ttl = redis.call('PTTL', KEYS[i])
      if ttl == -1 or ttl > reset then
        redis.call('PEXPIRE', KEYS[i], reset)
      end
    end
  end
  if retry > 0 then
    retry = math.max(retry, 1)
  end
  out[#out + 1] = math.max(div(math.max(rate * period - c * period - p * (period - e), 0), period), 0)
  out[#out + 1] = math.max(reset, 0)
  out[#out + 1] = retry
end
return out
