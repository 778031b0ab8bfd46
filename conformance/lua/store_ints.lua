-- Store contract check for integer scripts: returns {#KEYS, ARGV...} as
-- integers. A first argument of -1 returns an array holding a nil, -2 an
-- array holding a non-numeric string, -3 an error reply, -4 the integer
-- that the second argument holds (not an array), -5 a string.
local mode = tonumber(ARGV[1])
if mode == -4 then
  return tonumber(ARGV[2])
elseif mode == -5 then
  return 'x'
elseif mode == -1 then
  return {1, false, 2}
elseif mode == -2 then
  return {1, 'x', 2}
elseif mode == -3 then
  return redis.error_reply('ERR integer check: failing on purpose')
end
local out = {#KEYS}
for i = 1, #ARGV do
  out[#out + 1] = tonumber(ARGV[i])
end
return out
