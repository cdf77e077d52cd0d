-- kill.lua: dead-letter a leased task now (permanent failure). An
-- unreadable record under a held lease is parked in dead as it is.
-- KEYS[1] -> tasks base   KEYS[2] -> inflight ZSET   KEYS[3] -> idx HASH
-- KEYS[4] -> dead ZSET    KEYS[5] -> stats HASH      KEYS[6] -> lease HASH
-- ARGV[1] -> task ID   ARGV[2] -> fence   ARGV[3] -> error text (added to the
--   record's last ones)
-- Returns {C_DEAD, now} | {C_CANCELLED} (was cancelled: removed) | {error code}
local tasks, inflight, idx, dead, stats, lease = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local id = ARGV[1]
local t, code = owned(tasks, lease, id, ARGV[2])
local now = now_ms()
if not t then
  if code ~= C_CORRUPT then return {code} end
  end_lease(inflight, lease, id)
  redis.call('ZADD', dead, now, id)
  redis.call('HINCRBY', stats, 'corrupt', 1)
  return {C_DEAD, now}
end
if cancelled(t) then
  end_lease(inflight, lease, id)
  delete_task(tasks, idx, id, t)
  return {C_CANCELLED}
end
to_dead(inflight, lease, dead, tasks, stats, id, t, ARGV[3], now)
return {C_DEAD, now}
