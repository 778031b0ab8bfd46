-- A fixed window's many-request script (one limit per request) that runs
-- the requests in one loop, with nothing around each: the first error (a
-- counter of another type) ends the call, and every request of the batch,
-- those decided before it too, gets that error.
--
-- KEYS           one counter per request
-- ARGV           for each request: 1 (its keys), its number of arguments,
--                then FixedWindow's arguments ({rate, window_ms}, or
--                {cost, peek, rate, window_ms}); or 1 and -1 for the
--                arguments of the request before it
--
-- Returns {count, ttl_ms} per request (FixedWindow's reply to a call that
-- writes), the count taken back when over the rate.
local out, a, cost, costarg, rate, window = {}, 1, 1, '1', 0, '0'
for i = 1, #KEYS do
  local na = tonumber(ARGV[a + 1])
  a = a + 2
  if na == 2 then
    cost, costarg, rate, window = 1, '1', tonumber(ARGV[a]), ARGV[a + 1]
  elseif na == 4 then
    cost, costarg, rate, window = tonumber(ARGV[a]), ARGV[a], tonumber(ARGV[a + 2]), ARGV[a + 3]
  end
  if na > 0 then
    a = a + na
  end
  local c = redis.call('INCRBY', KEYS[i], costarg)
  local ttl = redis.call('PTTL', KEYS[i])
  if ttl < 0 then
    redis.call('PEXPIRE', KEYS[i], window)
    ttl = tonumber(window)
  end
  if c > rate then
    redis.call('DECRBY', KEYS[i], costarg)
  end
  out[i] = {c, math.max(ttl, 1)}
end
return out
