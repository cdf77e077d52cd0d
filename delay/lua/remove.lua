-- remove.lua: delete pending tasks by ID (reconcile: the source no longer has them).
-- KEYS[1] -> due ZSET   KEYS[2] -> tasks base   KEYS[3] -> idx HASH
-- ARGV[1..] -> task IDs (at most 1000); tasks not pending are left alone
-- Returns {C_OK, removed}
local due, tasks, idx = KEYS[1], KEYS[2], KEYS[3]
local n = 0
for i = 1, #ARGV do
  if redis.call('ZREM', due, ARGV[i]) == 1 then
    delete_task(tasks, idx, ARGV[i], parse(get_rec(tasks, ARGV[i])))
    n = n + 1
  end
end
return {C_OK, n}
