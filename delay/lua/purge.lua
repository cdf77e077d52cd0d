-- purge.lua: delete dead tasks with their records and index entries.
-- KEYS[1] -> dead ZSET   KEYS[2] -> tasks base   KEYS[3] -> idx HASH
-- ARGV[1] -> N: also purge the N oldest dead tasks (0 = only the listed IDs; N <= 1000)
-- ARGV[2..] -> task IDs (at most 1000)
-- Returns {C_OK, purged}
local dead, tasks, idx = KEYS[1], KEYS[2], KEYS[3]
local ids = {}
for i = 2, #ARGV do ids[#ids + 1] = ARGV[i] end
local n = tonumber(ARGV[1])
if n > 0 then
  for _, id in ipairs(redis.call('ZRANGE', dead, 0, n - 1)) do ids[#ids + 1] = id end
end
local purged = 0
for _, id in ipairs(ids) do
  if redis.call('ZREM', dead, id) == 1 then
    local blob = get_rec(tasks, id)
    delete_task(tasks, idx, id, parse(blob))
    purged = purged + 1
  end
end
return {C_OK, purged}
