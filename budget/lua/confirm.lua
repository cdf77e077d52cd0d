-- confirm.lua: makes a hold a redemption. Idempotent: a confirmed order
-- answers again with new = 0. An expired hold is answered 'expired' with
-- its request; the library then asks reserve.lua (mode 'c') whether the
-- caps still allow it.
--
-- KEYS[1] -> base name <prefix>:{b:<name>}: (never exists; derived keys)
-- KEYS[2] -> epoch
-- KEYS[3] -> holds
-- KEYS[4] -> unrep
-- KEYS[5] -> the order's record
-- KEYS[6] -> log (STREAM of confirmations)
-- ARGV[1] -> order
-- ARGV[2] -> record TTL ms
-- ARGV[3] -> report: '1' files expired holds in unrep
-- ARGV[4] -> log MAXLEN (approximate)
-- Returns {'ok', now, epoch, req, confirmed at ms, new (1|0)},
--   {'expired', now, req}, {'released', now}, {'notfound', now} or
--   {'lost', now}; WRONGTYPE, with nothing written, when holds, unrep or
--   log holds another type.
local now = now_ms()
local ep = live(KEYS[2])
if not ep then
  return {'lost', now}
end
-- The log is written after the record: one of another type would leave
-- an order confirmed with no entry for the ledger.
local bad = wrong_type({KEYS[3], 'zset', KEYS[4], 'zset', KEYS[6], 'stream'})
if bad then
  return bad
end
purge(KEYS[1], KEYS[3], KEYS[4], now, ARGV[3], ARGV[2])
local r = redis.call('HMGET', KEYS[5], 'st', 'req', 'ct')
if r[1] == 'h' and redis.call('ZREM', KEYS[3], ARGV[1]) == 0 then
  -- Held but not in holds: the holds index was lost (evicted), and a
  -- Rebuild since counted only the holds it listed, so this hold may
  -- count nowhere. Confirm it as an expired hold is, counted anew if the
  -- caps allow: an overcount until the next Rebuild if none ran, never
  -- an undercount.
  redis.call('HSET', KEYS[5], 'st', 'x')
  redis.call('PEXPIRE', KEYS[5], ARGV[2])
  return {'expired', now, r[2]}
end
if r[1] == 'h' then
  redis.call('HSET', KEYS[5], 'st', 'c', 'ct', now)
  redis.call('PEXPIRE', KEYS[5], ARGV[2])
  logged(KEYS[6], ARGV[4], ARGV[1], now, r[2], ep)
  return {'ok', now, ep, r[2], now, 1}
elseif r[1] == 'c' then
  return {'ok', now, ep, r[2], tonumber(r[3]), 0}
elseif r[1] == 'x' then
  return {'expired', now, r[2]}
elseif r[1] == 'r' then
  return {'released', now}
end
return {'notfound', now}
