-- reserve.lua: checks every cap of every line and reserves all or none
-- (mode 'r'), or confirms an expired hold again if its caps still allow
-- it (mode 'c'). Expired holds are purged first.
--
-- KEYS[1] -> base name <prefix>:{b:<name>}: (never exists; derived keys)
-- KEYS[2] -> epoch (string: generation, or rb:<token> while rebuilding)
-- KEYS[3] -> holds (ZSET order -> hold expiry ms)
-- KEYS[4] -> unrep (ZSET order -> expiry ms: expired, not yet reported)
-- KEYS[5] -> the order's record (HASH st, req, exp, d, at, ct)
-- KEYS[6] -> log (STREAM of confirmations)
-- KEYS[7] -> keyset (SET of counter key suffixes, and '' while whole)
-- ARGV[1] -> order
-- ARGV[2] -> req: the request as the library encodes it (its identity)
-- ARGV[3] -> hold ms
-- ARGV[4] -> record TTL ms (after a record ends)
-- ARGV[5] -> keep ms (a period key lives this long past its end)
-- ARGV[6] -> report: '1' files expired holds in unrep
-- ARGV[7] -> mode: 'r' reserve, 'c' confirm an expired hold
-- ARGV[8] -> log MAXLEN (approximate)
-- ARGV[9] -> call token: a record made with it answers new = 1 again, so
--   a script go-redis sends again after a cut reply still reports the
--   grant it made
-- ARGV[10..] -> caps (see caps in lib.lua)
-- Returns {'ok', now, epoch, state, expiry ms, new (1|0)},
--   {'limit', now, cap index (1-based), used}, {'conflict', now, state},
--   {'state', now, state} (mode 'c': the record is no longer expired),
--   {'lost', now} (no epoch, or a counter it reads is gone: see intact) or
--   {'skew', now}.
local base, order, req = KEYS[1], ARGV[1], ARGV[2]
local now = now_ms()
local ep = live(KEYS[2])
if not ep then
  return {'lost', now}
end
purge(base, KEYS[3], KEYS[4], now, ARGV[6], ARGV[4])
local r = redis.call('HMGET', KEYS[5], 'st', 'req', 'exp', 'n')
local st = r[1]
if ARGV[7] == 'r' then
  if st == 'h' or st == 'c' then
    if r[2] ~= req then
      return {'conflict', now, st}
    end
    local again = 0
    if st == 'h' and r[4] == ARGV[9] then
      again = 1 -- the same call sent again: its grant
    end
    return {'ok', now, ep, st, tonumber(r[3]), again}
  end
elseif st ~= 'x' or r[2] ~= req then
  return {'state', now, st or ''}
end
local list = caps(now, 10)
if not list then
  return {'skew', now}
end
if not intact(base, KEYS[7], list) then
  return {'lost', now}
end
local c, u = over(base, list)
if c then
  return {'limit', now, c, u}
end
local d = apply(base, KEYS[7], list, tonumber(ARGV[5]))
if ARGV[7] == 'r' then
  local exp = now + tonumber(ARGV[3])
  redis.call('DEL', KEYS[5])
  redis.call('HSET', KEYS[5], 'st', 'h', 'req', req, 'exp', exp, 'd', d, 'at', now, 'n', ARGV[9])
  redis.call('ZADD', KEYS[3], exp, order)
  -- An order reserved again after its hold ended has nothing left to report.
  redis.call('ZREM', KEYS[4], order)
  return {'ok', now, ep, 'h', exp, 1}
end
redis.call('HSET', KEYS[5], 'st', 'c', 'd', d, 'ct', now)
redis.call('PEXPIRE', KEYS[5], ARGV[4])
redis.call('ZREM', KEYS[4], order)
logged(KEYS[6], ARGV[8], order, now, req, ep)
return {'ok', now, ep, 'c', tonumber(r[3]), 1}
