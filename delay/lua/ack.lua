-- ack.lua: complete leased tasks, each checked against its fence.
-- KEYS[1] -> tasks HASH   KEYS[2] -> inflight ZSET   KEYS[3] -> idx HASH
-- KEYS[4] -> stats HASH
-- ARGV[2i-1] -> task ID   ARGV[2i] -> fence   (at most 1000 pairs)
-- Returns {code1, code2, ...}: C_OK, C_CANCELLED (was cancelled, removed),
--          C_NOT_FOUND, C_LEASE_LOST or C_CORRUPT per pair.
local tasks, inflight, idx, stats = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local out, acked = {}, 0
for i = 1, #ARGV, 2 do
  local id = ARGV[i]
  local t, code = owned(tasks, inflight, id, ARGV[i + 1])
  if t then
    redis.call('ZREM', inflight, id)
    delete_task(tasks, idx, id, t)
    acked = acked + 1
    if cancelled(t) then code = C_CANCELLED else code = C_OK end
  end
  out[#out + 1] = code
end
if acked > 0 then redis.call('HINCRBY', stats, 'acked', acked) end
return out
