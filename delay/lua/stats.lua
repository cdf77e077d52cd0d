-- stats.lua: depths and counters in one round trip, judged by Redis TIME.
-- KEYS[1] -> due ZSET   KEYS[2] -> inflight ZSET   KEYS[3] -> dead ZSET
-- KEYS[4] -> stats HASH   KEYS[5] -> done ZSET   KEYS[6] -> ctl HASH
-- KEYS[7] -> ctr HASH
-- ARGV[1] -> codec epoch ms   ARGV[2] -> 2^bits
-- Returns {C_OK, now, pending, ready (due now), inflight, dead, head score|'',
--          tombstones, field1, value1, ...}: the stats hash, then the
--          pseudo-fields 'ctl:paused' (since, Unix ms) when paused,
--          'ctl:rate' and 'ctl:burst' when a rate limit is set, and
--          'ctr:hw', the high-water mark of the current window and the
--          one before (0 when no enqueue met one; see hw_note).
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
local g = redis.call('HMGET', KEYS[6], 'paused', 'rate', 'burst')
if g[1] then
  out[#out + 1] = 'ctl:paused'
  out[#out + 1] = g[1]
end
if g[2] then
  out[#out + 1] = 'ctl:rate'
  out[#out + 1] = g[2]
  out[#out + 1] = 'ctl:burst'
  out[#out + 1] = g[3]
end
local hw = redis.call('HMGET', KEYS[7], 'hw', 'hww', 'hwp')
local w, win, mark = math.floor(now / HIGH_WATER_WINDOW_MS), tonumber(hw[2]), 0
if win == w then
  mark = math.max(tonumber(hw[1]) or 0, tonumber(hw[3]) or 0)
elseif win == w - 1 then
  mark = tonumber(hw[1]) or 0
end
out[#out + 1] = 'ctr:hw'
out[#out + 1] = fmt(mark)
return out
