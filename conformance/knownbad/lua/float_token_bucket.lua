-- Token bucket in floating point, as often written by hand: each call
-- refills elapsed * rate / period tokens, a fraction, and stores the sum
-- (HSET converts the number exactly), whether it admits or not. Sums of
-- fractions drift: ten refills of 0.1 make 0.9999999999999999 tokens.
--
-- KEYS[1]   hash {tokens, ts}, ts in milliseconds on the server's clock
-- ARGV[1]   rate (tokens per period)
-- ARGV[2]   period, milliseconds
-- ARGV[3]   capacity (burst)
-- ARGV[4]   cost (0: peek)
--
-- Returns {allowed, remaining, reset_ms, retry_ms}.
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local rate, period = tonumber(ARGV[1]), tonumber(ARGV[2])
local cap, cost = tonumber(ARGV[3]), tonumber(ARGV[4])
local v = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(v[1]) or cap
local ts = tonumber(v[2]) or now
tokens = math.min(cap, tokens + (now - ts) * rate / period)
local allowed, retry = 0, 0
if cost > cap then
  retry = -1
elseif tokens >= cost then
  allowed = 1
  tokens = tokens - cost
else
  retry = math.max(1, math.ceil((cost - tokens) * period / rate))
end
local reset = math.ceil((cap - tokens) * period / rate)
if cost > 0 then
  redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now)
  redis.call('PEXPIRE', KEYS[1], math.max(1, reset))
end
return {allowed, math.floor(tokens), reset, retry}
