-- release.lua: gives a hold back (the order was not paid). Idempotent: a
-- released or expired order answers with its state and new = 0; an
-- expired one is taken as reported.
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
-- Returns {'ok', now, state, new (1|0): for 'x', 1 when this call took
--   the expired order's report}, {'confirmed', now},
--   {'notfound', now} or {'lost', now}.
local now = now_ms()
if not live(KEYS[2]) then
  return {'lost', now}
end
purge(KEYS[1], KEYS[3], KEYS[4], now, ARGV[3], ARGV[2])
local st = redis.call('HGET', KEYS[5], 'st')
if st == 'h' then
  -- A hold missing from holds (the index was evicted) may count nowhere
  -- after a Rebuild: giving it back could undercount, so it is not.
  if redis.call('ZREM', KEYS[3], ARGV[1]) == 1 then
    undo(KEYS[1], redis.call('HGET', KEYS[5], 'd'))
  end
  redis.call('HSET', KEYS[5], 'st', 'r')
  redis.call('PEXPIRE', KEYS[5], ARGV[2])
  return {'ok', now, 'r', 1}
elseif st == 'r' then
  return {'ok', now, 'r', 0}
elseif st == 'x' then
  return {'ok', now, 'x', taken(KEYS[4], KEYS[5], ARGV[1], ARGV[4])}
elseif st == 'c' then
  return {'confirmed', now}
end
return {'notfound', now}
