-- The least a GCRA decision on the server's clock makes Redis do, for the
-- server-time benchmarks to compare with: read TIME, read the state, write
-- the new state with its expiry. It decides nothing (the state written is
-- a constant) and returns 1.
--
-- KEYS[1]  the state
-- ARGV[1]  "3": TIME, GET, SET PX (three calls, as a GCRA that works on
--          Redis 5 makes); "2": TIME, SET PX GET (two calls, Redis 6.2 and
--          later); "1": TIME alone
local t = redis.call('TIME')
if ARGV[1] == '3' then
  redis.call('GET', KEYS[1])
  redis.call('SET', KEYS[1], '1', 'PX', 1000)
elseif ARGV[1] == '2' then
  redis.call('SET', KEYS[1], '1', 'PX', 1000, 'GET')
end
return 1
