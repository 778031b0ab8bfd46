-- Fixed windows aligned to the Unix epoch, named by their index, several
-- limits decided at once, all or nothing.
--
-- KEYS[i]        counter of limit i in window b_i: a name ending in ":"
--                and the decimal b_i, the window [b_i * period_i,
--                (b_i + 1) * period_i) in Unix milliseconds (all keys in one
--                Cluster slot); the caller names the window from its
--                estimate of the server's clock
-- ARGV[1]        cost: 1 <= cost <= every rate when counting; any cost >= 0
--                for a read (ARGV holds the cost alone)
-- ARGV[2i]       rate of limit i
-- ARGV[2i+1]     period of limit i, in milliseconds
--
-- A read returns the counts, 0 for a counter that does not exist.
--
-- A counting call returns the counts after adding the cost: admitted when
-- every count is within its rate; otherwise denied, and the cost was taken
-- back from every limit. The common call (one limit, a counter that
-- exists, admitted) returns its count as an integer; every other call an
-- array {count_1, ..., count_n, ...}:
--   - admitted, no counter created: the counts alone;
--   - admitted, a counter created: the call read the server's clock, and
--     the counts are followed by TIME's seconds and microseconds;
--   - denied: the counts are followed by the server's clock in Unix
--     milliseconds (read from a counter's TTL);
--   - {-1, seconds, microseconds}: the server's clock (TIME) is outside a
--     window this call would have created (the caller's estimate of the
--     clock was off): nothing is counted; the caller names the windows
--     again from that time.
--
-- Why one INCRBY is enough for the common call: a counter is created only
-- by a call that reads TIME and finds the server's clock in the counter's
-- window, and it expires at the window's end (PEXPIREAT, an absolute time,
-- set once). So a counter exists only during its own window by the
-- server's clock, and a call that finds it existing counts in the right
-- window without reading the clock. The window never slides.
--
-- A counter that INCRBY refuses (not an integer, a key of another type), or
-- one found negative, is an error, and every counter is left as it was
-- found (a counter this call created is deleted). A counting call that is
-- denied gives a counter found without a TTL (a leak from elsewhere) its
-- window's end back; an admitted call does not look (it would cost a
-- second command), and a counter is never read after its window.
-- The common call first: one limit, counting, a counter that exists, and
-- admitted: one INCRBY, nothing else made (no table, no closure).
local n = #KEYS
local c
if n == 1 and #ARGV == 3 then
  c = redis.call('INCRBY', KEYS[1], ARGV[1])
  if c > tonumber(ARGV[1]) and c <= tonumber(ARGV[2]) then
    return c
  end
end

if #ARGV == 1 then
  local out = {}
  for i = 1, n do
    local v = redis.call('GET', KEYS[i])
    if v and not string.match(v, '^%d+$') then
      return redis.error_reply('ERR limiter corrupt counter: the key of limit ' .. i .. ' holds no counter')
    end
    out[i] = tonumber(v or '0')
  end
  return out
end

local cost = tonumber(ARGV[1])

-- the window of limit i: its start and end, Unix milliseconds
local function window(i)
  local p = tonumber(ARGV[2 * i + 1])
  local b = tonumber(string.match(KEYS[i], ':(%d+)$'))
  return b * p, (b + 1) * p
end

-- The server's clock, in Unix milliseconds, read from the TTL of limit i's
-- counter (which exists) at a denial: its window's end minus its PTTL. A
-- counter without a TTL (a leak from elsewhere) gets its window's end back
-- (an end already past deletes it), and the clock is read from TIME.
local function denied_at(i, stop)
  local ttl = redis.call('PTTL', KEYS[i])
  if ttl >= 0 then
    return stop - ttl
  end
  redis.call('PEXPIREAT', KEYS[i], stop)
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end

-- One limit, counted above, and not the common call.
if n == 1 then
  local key = KEYS[1]
  if c < cost then
    redis.call('DECRBY', key, ARGV[1])
    return redis.error_reply('ERR limiter corrupt counter: the key of limit 1 holds no counter')
  end
  local start, stop = window(1)
  if c > cost then
    -- over the rate: denied, taken back
    redis.call('DECRBY', key, ARGV[1])
    return {c, denied_at(1, stop)}
  end
  -- created by this call (or found at 0): is the server's clock in its
  -- window?
  local t = redis.call('TIME')
  local ms = t[1] * 1000 + math.floor(t[2] / 1000)
  if ms < start or ms >= stop then
    redis.call('DEL', key)
    return {-1, t[1], t[2]}
  end
  redis.call('PEXPIREAT', key, stop)
  return {c, t[1], t[2]}
end

-- Several limits: the same for each, all or nothing.
local counts = {}
local function back(upto)
  for j = 1, upto do
    if counts[j] == cost then
      redis.call('DEL', KEYS[j])
    else
      redis.call('DECRBY', KEYS[j], ARGV[1])
    end
  end
end
local over, created = false, false
for i = 1, n do
  local c = redis.pcall('INCRBY', KEYS[i], ARGV[1])
  if type(c) ~= 'number' or c < cost then
    if type(c) == 'number' then
      redis.call('DECRBY', KEYS[i], ARGV[1])
      c = redis.error_reply('ERR limiter corrupt counter: the key of limit ' .. i .. ' holds no counter')
    end
    back(i - 1)
    return c
  end
  counts[i] = c
  if c > tonumber(ARGV[2 * i]) then
    over = true
  elseif c == cost then
    created = true
  end
end
if over then
  back(n)
  local now
  for i = 1, n do
    if counts[i] ~= cost then
      local _, stop = window(i)
      local at = denied_at(i, stop)
      now = now or at
    end
  end
  counts[n + 1] = now
  return counts
end
if created then
  local t = redis.call('TIME')
  local ms = t[1] * 1000 + math.floor(t[2] / 1000)
  for i = 1, n do
    if counts[i] == cost then
      local start, stop = window(i)
      if ms < start or ms >= stop then
        back(n)
        return {-1, t[1], t[2]}
      end
    end
  end
  for i = 1, n do
    if counts[i] == cost then
      local _, stop = window(i)
      redis.call('PEXPIREAT', KEYS[i], stop)
    end
  end
  counts[n + 1] = t[1]
  counts[n + 2] = t[2]
end
return counts
