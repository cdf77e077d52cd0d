-- extend.lua: push a held lease's deadline to Redis TIME + lease.
-- KEYS[1] -> tasks base   KEYS[2] -> inflight ZSET   KEYS[3] -> lease HASH
-- ARGV[1] -> task ID   ARGV[2] -> fence   ARGV[3] -> lease ms
-- Returns {C_OK, new deadline ms} | {error code}
local t, code = owned(KEYS[1], KEYS[3], ARGV[1], ARGV[2])
if not t and code ~= C_CORRUPT then return {code} end
local deadline = now_ms() + tonumber(ARGV[3])
redis.call('ZADD', KEYS[2], 'XX', fmt(deadline), ARGV[1])
return {C_OK, fmt(deadline)}
