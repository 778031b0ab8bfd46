-- The expiry of KEYS[1] as the server keeps it, for a server without
-- PEXPIRETIME (before Redis 7.0): its clock (TIME) before and after the
-- key's PTTL, read in one script, so on the key's node. Returns {seconds,
-- microseconds, pttl, seconds, microseconds}: the expiry lies between the
-- two times' milliseconds plus the PTTL (a millisecond earlier where the
-- server reads PTTL on the clock of the script's start).
local t1 = redis.call('TIME')
local p = redis.call('PTTL', KEYS[1])
local t2 = redis.call('TIME')
return {tonumber(t1[1]), tonumber(t1[2]), p, tonumber(t2[1]), tonumber(t2[2])}
