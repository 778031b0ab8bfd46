-- One rule of RuleByRule, a known-bad control: INCR first, EXPIRE (in whole
-- seconds) only when the counter was just created, then compare. A request
-- over the limit has already consumed; a window under one second gets
-- EXPIRE 0, which deletes the key at once.
--
-- KEYS[1] counter, ARGV[1] window in seconds, ARGV[2] threshold, ARGV[3] cost
local current = redis.call('INCRBY', KEYS[1], ARGV[3])
if tonumber(current) == tonumber(ARGV[3]) then
  redis.call('EXPIRE', KEYS[1], tonumber(ARGV[1]))
end
return {current, redis.call('PTTL', KEYS[1])}
