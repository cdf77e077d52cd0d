-- requeue.lua: move dead tasks back to due (now), attempts reset to 0, last error kept.
-- All or nothing: every score is found before the first write, so an
-- error code leaves every task in dead as it was.
-- KEYS[1] -> dead ZSET   KEYS[2] -> tasks base   KEYS[3] -> due ZSET
-- KEYS[4] -> ctr HASH    KEYS[5] -> stats HASH   KEYS[6] -> wake LIST
-- ARGV[1] -> codec epoch ms   ARGV[2] -> 2^bits   ARGV[3] -> codec max ms offset
-- ARGV[4..] -> task IDs (at most 1000)
-- Returns {C_OK, requeued, skipped (not dead, unreadable or repeated)}
--       | {C_RANGE|C_SEQ} (nothing moved)
local dead, tasks, due, ctr, stats, wake = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local epoch, mult, maxrel = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()
local skipped, plan, seen, st = 0, {}, {}, nil
for i = 4, #ARGV do
  local id = ARGV[i]
  local t = nil
  if not seen[id] and redis.call('ZSCORE', dead, id) then t = parse(get_rec(tasks, id)) end
  seen[id] = true
  if t then
    if not st then
      local l = redis.call('HMGET', ctr, 'ms', 'seq', 'req')
      st = assigner(due, epoch, mult, maxrel, tonumber(l[1]), tonumber(l[2]), tonumber(l[3]))
    end
    local score, c = st.assign(now)
    if not score then return {c} end
    plan[#plan + 1] = {id, t, score}
  else
    skipped = skipped + 1
  end
end
for _, p in ipairs(plan) do
  local id, t = p[1], p[2]
  redis.call('ZREM', dead, id)
  t.attempt = 0 -- the last error stays, for the next handler to see
  put_rec(tasks, id, build(t))
  add_due(due, wake, id, p[3])
end
if st then
  redis.call('HSET', ctr, ctr_last(st))
  if st.overflow > 0 then redis.call('HINCRBY', stats, 'overflow', st.overflow) end
end
return {C_OK, #plan, skipped}
