-- remaining.lua: every cap's counter for a cart, holds whose time has
-- passed purged first, in one call.
--
-- KEYS[1] -> base name <prefix>:{b:<name>}: (never exists; derived keys)
-- KEYS[2] -> epoch
-- KEYS[3] -> holds
-- KEYS[4] -> unrep
-- KEYS[5] -> keyset (SET of counter key suffixes, and '' while whole)
-- ARGV[1] -> record TTL ms
-- ARGV[2] -> report: '1' files expired holds in unrep
-- ARGV[3..] -> caps (see caps in lib.lua; deltas are 0)
-- Returns {'ok', now, {used per cap}}, {'skew', now} or {'lost', now}.
local now = now_ms()
if not live(KEYS[2]) then
  return {'lost', now}
end
purge(KEYS[1], KEYS[3], KEYS[4], now, ARGV[2], ARGV[1])
local list = caps(now, ARGV, 3)
if not list then
  return {'skew', now}
end
-- A counter that was evicted would read as 0: more left than there is.
if not intact(KEYS[1], KEYS[5], list) then
  return {'lost', now}
end
local out = {}
for c, cap in ipairs(list) do
  out[c] = used(KEYS[1], cap)
end
return {'ok', now, out}
