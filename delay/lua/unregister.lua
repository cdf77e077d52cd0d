-- unregister.lua: a pool leaves the worker registry of one server and key
-- prefix at the end of its Run, only if its owner token still holds the
-- ID: a pool never deletes the entry of another pool with the same ID.
-- KEYS[1] -> entry STRING <prefix>:{workers}:w:<id>
-- KEYS[2] -> owner STRING <prefix>:{workers}:o:<id>
-- KEYS[3] -> live ZSET    <prefix>:{workers}:live
-- ARGV[1] -> pool ID   ARGV[2] -> owner token
-- Returns {C_OK, removed}: removed 1 when this token's entry was deleted,
--          0 when the ID is another owner's or already expired.
local entry, owner, live = KEYS[1], KEYS[2], KEYS[3]
if redis.call('GET', owner) ~= ARGV[2] then return {C_OK, 0} end
redis.call('DEL', entry, owner)
redis.call('ZREM', live, ARGV[1])
return {C_OK, 1}
