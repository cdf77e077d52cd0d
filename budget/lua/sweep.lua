-- sweep.lua: purges holds whose time has passed and lists expired orders
-- whose report was not taken within the grace (the library enqueues
-- their expiry task again).
--
-- KEYS[1] -> base name <prefix>:{b:<name>}: (never exists; derived keys)
-- KEYS[2] -> epoch
-- KEYS[3] -> holds
-- KEYS[4] -> unrep
-- ARGV[1] -> record TTL ms
-- ARGV[2] -> report: '1' files expired holds in unrep
-- ARGV[3] -> grace ms
-- ARGV[4] -> at most this many orders
-- Returns {'ok', now, held, {order, expiry ms, ...}} or {'lost', now}.
local now = now_ms()
if not live(KEYS[2]) then
  return {'lost', now}
end
purge(KEYS[1], KEYS[3], KEYS[4], now, ARGV[2], ARGV[1])
local late = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now - tonumber(ARGV[3]),
  'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[4]))
return {'ok', now, redis.call('ZCARD', KEYS[3]), late}
