-- reschedule_ids.lua: move pending tasks, by ID, to a new due time. An ID
-- acts only while it still names its task (IDs are never reused): one
-- whose record is gone, or that is no longer pending, is skipped, so a
-- task enqueued since with the same key and token is never touched.
-- All or nothing: every new score is found before the first write, so an
-- error leaves each task exactly as it was.
-- KEYS[1] -> tasks base   KEYS[2] -> due ZSET   KEYS[3] -> inflight ZSET
-- KEYS[4] -> dead ZSET   KEYS[5] -> ctr HASH   KEYS[6] -> stats HASH
-- KEYS[7] -> wake LIST
-- ARGV[1] -> 'at' | 'after'   ARGV[2] -> Unix ms | delay ms
-- ARGV[3] -> codec epoch ms   ARGV[4] -> 2^bits   ARGV[5] -> codec max ms offset
-- ARGV[6..] -> task IDs (at most 1000; a repeated ID counts once)
-- Returns {C_OK, pending moved, in flight (untouched), dead (untouched), new score|''}
--       | {C_BEFORE_EPOCH|C_RANGE|C_SEQ} (nothing moved)
local tasks, due, inflight, dead, ctr, stats, wake = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local epoch, mult, maxrel = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local now = now_ms()
local ms = tonumber(ARGV[2])
if ARGV[1] == 'after' then ms = now + ms end
if ms - epoch < 0 then return {C_BEFORE_EPOCH} end
if ms - epoch > maxrel then return {C_RANGE} end
local flying, deadn, last = 0, 0, ''
local st, moves, head, headid, seen = nil, {}, nil, nil, {}
for i = 6, #ARGV do
  local id = ARGV[i]
  if not seen[id] then
    seen[id] = true
    if not get_rec(tasks, id) then
      -- gone: finished or removed, nothing to move
    elseif redis.call('ZSCORE', due, id) then
      if not st then
        local l = redis.call('HMGET', ctr, 'ms', 'seq', 'req')
        st = assigner(due, epoch, mult, maxrel, tonumber(l[1]), tonumber(l[2]), tonumber(l[3]))
      end
      local score, c = st.assign(ms)
      if not score then return {c} end
      moves[#moves + 1] = fmt(score)
      moves[#moves + 1] = id
      if not head or score < head then head, headid = score, id end
      last = fmt(score)
    elseif redis.call('ZSCORE', inflight, id) then
      flying = flying + 1
    elseif redis.call('ZSCORE', dead, id) then
      deadn = deadn + 1
    end
  end
end
if st then
  -- ZADD of a member already there only changes its score
  redis.call('ZADD', due, unpack(moves))
  redis.call('HSET', ctr, ctr_last(st))
  if st.overflow > 0 then redis.call('HINCRBY', stats, 'overflow', st.overflow) end
  if redis.call('ZRANK', due, headid) == 0 then push_wake(wake) end
end
return {C_OK, #moves / 2, flying, deadn, last}
