-- stats.lua: depths and counters in one round trip, judged by Redis TIME.
-- KEYS[1] -> due ZSET   KEYS[2] -> inflight ZSET   KEYS[3] -> dead ZSET
-- KEYS[4] -> stats HASH   KEYS[5] -> done ZSET
-- ARGV[1] -> codec epoch ms   ARGV[2] -> 2^bits
-- Returns {C_OK, now, pending, ready (due now), inflight, dead, head score|'',
--          tombstones, field1, value1, ...} (the stats hash)
local now = now_ms()
local epoch, mult = tonumber(ARGV[1]), tonumber(ARGV[2])
local bound = (now - epoch) * mult + mult - 1
local ready = 0
if bound >= 0 then ready = redis.call('ZCOUNT', KEYS[1], '-inf', fmt(bound)) end
local out = {C_OK, fmt(now), redis.call('ZCARD', KEYS[1]), ready,
  redis.call('ZCARD', KEYS[2]), redis.call('ZCARD', KEYS[3]), ''}
local h = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if h[2] then out[7] = h[2] end
out[8] = redis.call('ZCARD', KEYS[5])
for _, v in ipairs(redis.call('HGETALL', KEYS[4])) do out[#out + 1] = v end
return out
