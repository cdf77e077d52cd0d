-- requeue.lua: move dead tasks back to due (now), attempts reset to 0, last error kept.
-- KEYS[1] -> dead ZSET   KEYS[2] -> tasks base   KEYS[3] -> due ZSET
-- KEYS[4] -> ctr HASH    KEYS[5] -> stats HASH   KEYS[6] -> wake LIST
-- ARGV[1] -> codec epoch ms   ARGV[2] -> 2^bits   ARGV[3] -> codec max ms offset
-- ARGV[4..] -> task IDs (at most 1000)
-- Returns {C_OK, requeued, skipped (not dead or unreadable)}
local dead, tasks, due, ctr, stats, wake = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local epoch, mult, maxrel = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()
local n, skipped = 0, 0
for i = 4, #ARGV do
  local id = ARGV[i]
  local t = nil
  if redis.call('ZSCORE', dead, id) then t = parse(get_rec(tasks, id)) end
  local score = nil
  if t then score = assign_score(due, ctr, stats, now, epoch, mult, maxrel) end
  if score then
    redis.call('ZREM', dead, id)
    t.attempt = 0 -- the last error stays, for the next handler to see
    put_rec(tasks, id, build(t))
    add_due(due, wake, id, score)
    n = n + 1
  else
    skipped = skipped + 1
  end
end
return {C_OK, n, skipped}
