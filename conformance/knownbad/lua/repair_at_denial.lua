-- A first-request fixed window that gives a counter found without a TTL
-- its TTL back only when it denies, as a script that saves the PTTL of the
-- admitted path would, without naming its keys by window: a counter
-- stripped of its TTL and never denied keeps counting forever.
--
-- KEYS[1] counter, ARGV[1] cost, ARGV[2] rate, ARGV[3] window in ms
-- Returns {count after adding the cost, PTTL}; over the rate the cost was
-- taken back.
local c = redis.call('INCRBY', KEYS[1], ARGV[1])
if c == tonumber(ARGV[1]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
if c > tonumber(ARGV[2]) then
  redis.call('DECRBY', KEYS[1], ARGV[1])
  if redis.call('PTTL', KEYS[1]) == -1 then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
  end
end
return {c, redis.call('PTTL', KEYS[1])}
