-- expire.lua: what the expiry task's handler calls. It purges holds whose
-- time has passed and takes the order's report: an expired order leaves
-- unrep (first = 1 the first time).
--
-- KEYS[1] -> base name <prefix>:{b:<name>}: (never exists; derived keys)
-- KEYS[2] -> epoch
-- KEYS[3] -> holds
-- KEYS[4] -> unrep
-- KEYS[5] -> the order's record
-- ARGV[1] -> order
-- ARGV[2] -> record TTL ms
-- ARGV[3] -> report: '1' files expired holds in unrep
-- ARGV[4] -> call token (see taken in lib.lua)
-- Returns {'ok', now, state, expiry ms, first (1|0)}, {'notfound', now}
--   or {'lost', now}.
local now = now_ms()
if not live(KEYS[2]) then
  return {'lost', now}
end
purge(KEYS[1], KEYS[3], KEYS[4], now, ARGV[3], ARGV[2])
local r = redis.call('HMGET', KEYS[5], 'st', 'exp')
if not r[1] then
  return {'notfound', now}
end
local first = 0
if r[1] == 'x' then
  first = taken(KEYS[4], KEYS[5], ARGV[1], ARGV[4])
end
return {'ok', now, r[1], tonumber(r[2]), first}
