-- cancel_ids.lua: cancel tasks by ID, in any state, in one step. An ID
-- acts only while it still names its task: IDs are never reused, so an ID
-- whose record is gone (finished, cancelled, purged) or is a tombstone is
-- skipped, and a task enqueued since with the same key and token (a new
-- ID) is never touched. Pending tasks are removed, in-flight ones marked
-- (their ack removes them, they are never retried), dead ones removed (a
-- dead ID whose record is lost or unreadable too, as purge does).
-- KEYS[1] -> idx HASH   KEYS[2] -> tasks base   KEYS[3] -> due ZSET
-- KEYS[4] -> inflight ZSET   KEYS[5] -> dead ZSET   KEYS[6] -> stats HASH
-- ARGV[1..] -> task IDs (at most 1000; a repeated ID counts once)
-- Returns {C_OK, pending removed, in flight marked, dead removed, already cancelled}
local idx, tasks, due, inflight, dead, stats = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local pending, flying, deadn, already = 0, 0, 0, 0
local seen = {}
for i = 1, #ARGV do
  local id = ARGV[i]
  if not seen[id] then
    seen[id] = true
    local t = parse(get_rec(tasks, id))
    if t and is_done(t.flags) then
      t = nil -- a tombstone: acked, in no set
    elseif t and redis.call('ZREM', due, id) == 1 then
      delete_task(tasks, idx, id, t)
      pending = pending + 1
    elseif t and redis.call('ZSCORE', inflight, id) then
      if not cancelled(t) then
        t.flags = t.flags + F_CANCELLED
        put_rec(tasks, id, build(t))
        flying = flying + 1
      else
        already = already + 1
      end
    elseif redis.call('ZREM', dead, id) == 1 then
      delete_task(tasks, idx, id, t)
      deadn = deadn + 1
    end
  end
end
if pending + flying + deadn > 0 then redis.call('HINCRBY', stats, 'cancelled', pending + flying + deadn) end
return {C_OK, pending, flying, deadn, already}
