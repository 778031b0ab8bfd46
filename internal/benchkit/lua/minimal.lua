-- The minimal hand-written fixed window, the floor the benchmarks measure
-- against: count, give a new counter its expiry, return the count. It
-- reports nothing else (no reset time, no wait) and repairs nothing.
--
-- KEYS[1]  the counter
-- ARGV[1]  the window, in milliseconds
local c = redis.call('INCR', KEYS[1])
if c == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return c
