-- browse.lua: what an operator looks at first: how many tasks fall due
-- within a horizon, the tasks due soonest and the oldest leases.
-- KEYS[1] -> due ZSET   KEYS[2] -> inflight ZSET   KEYS[3] -> tasks base
-- ARGV[1] -> codec epoch ms   ARGV[2] -> 2^bits   ARGV[3] -> horizon ms
-- ARGV[4] -> n, tasks listed per set (0..1000)
-- Returns {C_OK, now, pending not yet due but due within the horizon, n due listed,
--          (id, score, record|'') per due task, (id, deadline ms, record|'') per lease}
local now = now_ms()
local epoch, mult = tonumber(ARGV[1]), tonumber(ARGV[2])
local ready = (now - epoch) * mult + mult - 1
local soon = (now + tonumber(ARGV[3]) - epoch) * mult + mult - 1
local n = tonumber(ARGV[4])
local out = {C_OK, fmt(now), 0, 0}
if soon >= 0 then out[3] = redis.call('ZCOUNT', KEYS[1], '(' .. fmt(ready), fmt(soon)) end
local function list(key)
  if n < 1 then return 0 end
  local items = redis.call('ZRANGE', key, 0, n - 1, 'WITHSCORES')
  for i = 1, #items, 2 do
    out[#out + 1] = items[i]
    out[#out + 1] = items[i + 1]
    out[#out + 1] = get_rec(KEYS[3], items[i]) or ''
  end
  return #items / 2
end
out[4] = list(KEYS[1])
list(KEYS[2])
return out
