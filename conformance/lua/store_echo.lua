-- Store contract check: writes KEYS[1] with a TTL and returns a nested reply
-- of an integer, a string and an array.
redis.call('SET', KEYS[1], ARGV[1], 'PX', 60000)
return {1, ARGV[1], {2, redis.call('GET', KEYS[1])}}
