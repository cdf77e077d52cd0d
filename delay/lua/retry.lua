-- retry.lua: give a leased task back with a delay, or dead-letter it.
-- KEYS[1] -> tasks base   KEYS[2] -> inflight ZSET   KEYS[3] -> idx HASH
-- KEYS[4] -> due ZSET     KEYS[5] -> dead ZSET       KEYS[6] -> ctr HASH
-- KEYS[7] -> stats HASH   KEYS[8] -> wake LIST       KEYS[9] -> lease HASH
-- ARGV[1] -> task ID   ARGV[2] -> fence   ARGV[3] -> delay ms
-- ARGV[4] -> max attempts   ARGV[5] -> this attempt's error text (added to
--   the record's last ones)
-- ARGV[6] -> codec epoch ms   ARGV[7] -> 2^bits   ARGV[8] -> codec max ms offset
-- Returns {C_OK, score, now} (back in due) | {C_DEAD, now} | {C_CANCELLED} | {error code}
local tasks, inflight, idx, due, dead, ctr, stats, wake, lease =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local id = ARGV[1]
local t, code = owned(tasks, lease, id, ARGV[2])
if not t then return {code} end
local now = now_ms()
if cancelled(t) then
  end_lease(inflight, lease, id)
  delete_task(tasks, idx, id, t)
  return {C_CANCELLED}
end
if t.attempt + 1 >= tonumber(ARGV[4]) then -- the delivery in hand is attempt+1
  to_dead(inflight, lease, dead, tasks, stats, id, t, ARGV[5], now)
  return {C_DEAD, fmt(now)}
end
local score, c = assign_score(due, ctr, stats, now + tonumber(ARGV[3]),
  tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]))
if not score then return {c} end
end_lease(inflight, lease, id)
t.attempt = t.attempt + 1
t.err = push_err(t.err, ARGV[5])
put_rec(tasks, id, build(t))
add_due(due, wake, id, score)
redis.call('HINCRBY', stats, 'retries', 1)
return {C_OK, fmt(score), fmt(now)}
