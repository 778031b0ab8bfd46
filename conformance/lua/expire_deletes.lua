-- Put before a script by the suite's property 45 (never sent alone): the
-- script's redis.call and redis.pcall, when they give a key an expiry
-- (PEXPIRE, EXPIRE, PEXPIREAT, EXPIREAT) at most 2 ms away, delete the key
-- at once, as a real server may. Redis (7.0 here) deletes a key at such a
-- command when its new expiry is already past by the server's clock
-- (PEXPIRE key 1 when the clock crosses a millisecond between the two
-- readings the command makes, or after a pause of the server's process),
-- and the rest of the script then finds no key: the expiry that the other
-- commands of a script read is frozen at the script's start, this one is
-- not. The scripts' own `local redis = redis` reads this local.
local redis = (function(r)
  local w = {}
  for k, v in pairs(r) do
    w[k] = v
  end
  local function wrap(f)
    return function(...)
      local res = f(...)
      local cmd, key, at = ...
      if res ~= 1 then
        return res -- an error, or no key to expire
      end
      local c = string.upper(cmd)
      local gone = false
      if c == 'PEXPIRE' then
        gone = tonumber(at) <= 2
      elseif c == 'EXPIRE' then
        gone = tonumber(at) <= 0
      elseif c == 'PEXPIREAT' or c == 'EXPIREAT' then
        local t = r.call('TIME')
        local ms = tonumber(at)
        if c == 'EXPIREAT' then
          ms = ms * 1000
        end
        gone = ms <= tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + 2
      end
      if gone then
        r.call('DEL', key)
      end
      return res
    end
  end
  w.call, w.pcall = wrap(r.call), wrap(r.pcall)
  return w
end)(redis)
