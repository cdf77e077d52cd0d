-- deadlist.lua: one page of the dead-letter set, oldest first.
-- KEYS[1] -> dead ZSET   KEYS[2] -> tasks base
-- ARGV[1] -> offset   ARGV[2] -> count (1..1000)
-- Returns {C_OK, total, id1, died-at ms1, record1|'', ...}
local out = {C_OK, redis.call('ZCARD', KEYS[1])}
local o = tonumber(ARGV[1])
local items = redis.call('ZRANGE', KEYS[1], o, o + tonumber(ARGV[2]) - 1, 'WITHSCORES')
for i = 1, #items, 2 do
  out[#out + 1] = items[i]
  out[#out + 1] = items[i + 1]
  out[#out + 1] = get_rec(KEYS[2], items[i]) or ''
end
return out
