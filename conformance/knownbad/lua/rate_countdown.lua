-- A fixed window whose counter counts down from the rate it was created
-- with (it holds rate - count), kept as a known-bad control: when a
-- rule's rate changes and its name and period stay, the counter left by
-- the old rate is read against the new one.
--
-- KEYS[1] counter, ARGV[1] cost, ARGV[2] rate, ARGV[3] window in ms
-- Returns {what is left after the cost (below 0: denied, the cost given
-- back), the counter's PTTL in ms}.
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
end
local left = redis.call('DECRBY', KEYS[1], ARGV[1])
if left < 0 then
  redis.call('INCRBY', KEYS[1], ARGV[1])
end
return {left, redis.call('PTTL', KEYS[1])}
