-- kill.lua: dead-letter a leased task now (permanent failure).
-- KEYS[1] -> tasks base   KEYS[2] -> inflight ZSET   KEYS[3] -> idx base
-- KEYS[4] -> dead ZSET    KEYS[5] -> stats HASH
-- ARGV[1] -> task ID   ARGV[2] -> fence   ARGV[3] -> last error text
-- Returns {C_DEAD, now} | {C_CANCELLED} (was cancelled: removed) | {error code}
local tasks, inflight, idx, dead, stats = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local id = ARGV[1]
local t, code = owned(tasks, inflight, id, ARGV[2])
if not t then return {code} end
if cancelled(t) then
  redis.call('ZREM', inflight, id)
  delete_task(tasks, idx, id, t)
  return {C_CANCELLED}
end
local now = now_ms()
to_dead(inflight, dead, tasks, stats, id, t, ARGV[3], now)
return {C_DEAD, fmt(now)}
