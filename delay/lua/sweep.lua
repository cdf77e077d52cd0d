-- sweep.lua: return at most N expired leases (deadline < Redis TIME) to due.
-- KEYS[1] -> inflight ZSET   KEYS[2] -> tasks base   KEYS[3] -> idx HASH
-- KEYS[4] -> due ZSET        KEYS[5] -> dead ZSET    KEYS[6] -> ctr HASH
-- KEYS[7] -> stats HASH      KEYS[8] -> wake LIST    KEYS[9] -> lease HASH
-- KEYS[10] -> done ZSET
-- ARGV[1] -> N (1..1000)   ARGV[2] -> max attempts
-- ARGV[3] -> codec epoch ms   ARGV[4] -> 2^bits   ARGV[5] -> codec max ms offset
-- It also deletes at most N tombstones whose time is up (record and index).
-- An expired lease whose record is gone (lost: an evicted bucket) goes to
-- dead, counted in stats 'lost' and in the reply, never dropped.
-- Returns {C_OK, returned to due, dead-lettered, deleted (cancelled or
--          corrupt, parked in dead when unreadable), tombstones deleted,
--          lost}
local inflight, tasks, idx, due, dead, ctr, stats, wake, lease =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local maxatt = tonumber(ARGV[2])
local epoch, mult, maxrel = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local now = now_ms()
local ids = redis.call('ZRANGEBYSCORE', inflight, '-inf', '(' .. fmt(now), 'LIMIT', 0, tonumber(ARGV[1]))
local back, died, deleted, lost = 0, 0, 0, 0
for _, id in ipairs(ids) do
  local blob = get_rec(tasks, id)
  local t = parse(blob)
  if not t then
    end_lease(inflight, lease, id)
    redis.call('ZADD', dead, fmt(now), id)
    if blob then deleted = deleted + 1 else lost = lost + 1 end
  elseif cancelled(t) then
    end_lease(inflight, lease, id)
    delete_task(tasks, idx, id, t)
    deleted = deleted + 1
  elseif t.attempt + 1 >= maxatt then -- the expired delivery was attempt+1
    to_dead(inflight, lease, dead, tasks, stats, id, t, 'delay: lease expired', now)
    died = died + 1
  else
    local score = assign_score(due, ctr, stats, now, epoch, mult, maxrel)
    if score then
      end_lease(inflight, lease, id)
      t.attempt = t.attempt + 1
      t.err = push_err(t.err, 'delay: lease expired')
      put_rec(tasks, id, build(t))
      add_due(due, wake, id, score)
      back = back + 1
    end
  end
end
if back > 0 then redis.call('HINCRBY', stats, 'expired', back) end
if lost > 0 then redis.call('HINCRBY', stats, 'lost', lost) end
local ended = redis.call('ZRANGEBYSCORE', KEYS[10], '-inf', '(' .. fmt(now), 'LIMIT', '0', ARGV[1])
for _, id in ipairs(ended) do
  delete_task(tasks, idx, id, parse(get_rec(tasks, id)))
end
if #ended > 0 then redis.call('ZREM', KEYS[10], unpack(ended)) end
return {C_OK, back, died, deleted, #ended, lost}
