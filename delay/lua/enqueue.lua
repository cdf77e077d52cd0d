-- enqueue.lua: idempotent enqueue of one task.
-- KEYS[1] -> due ZSET        KEYS[2] -> inflight ZSET   KEYS[3] -> dead ZSET
-- KEYS[4] -> tasks base      KEYS[5] -> idx HASH        KEYS[6] -> ctr HASH
-- KEYS[7] -> stats HASH      KEYS[8] -> wake LIST
-- ARGV[1] -> business key    ARGV[2] -> its digest
-- ARGV[3] -> token ('' = generate: the token is the ID)
-- ARGV[4] -> the fresh record (Go's freshRecord: flags F_SOLE)
-- ARGV[5] -> when: ms after the codec epoch (>= 0), or -(delay ms + 1)
--            for a delay from Redis TIME
-- ARGV[6] -> codec epoch ms  ARGV[7] -> 2^bits   ARGV[8] -> codec max ms offset
-- ARGV[9] -> max tasks per business key
-- Returns {C_OK, id, score, now} | {C_DUP, id, state, score, now}
--       | {C_RESTORED, id, 'pending', score, now} (the task's record was in
--         no set: it is due again at when) | {code}
-- (new scores and now as integer replies, exact below 2^53). C_CTR_LOST and
-- C_IDX_LOST refuse before any write: Go repairs and sends again.
-- The ctr hash's high-water mark follows the task's seq (hw_note).
-- A new record is written with HSETNX, first: an ID that already has a
-- record (a counter gone back) is refused, never overwritten.
local due, inflight, dead, tasks, idx, ctr, stats, wake =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local key, dg, token, rec = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local epoch, mult, maxrel, maxper = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local now = now_ms()

local iv = redis.call('HMGET', idx, dg, IDX_MARK)
-- no index mark: a new queue, or an index lost while the queue holds
-- tasks, where a duplicate would pass
local mark = not iv[2]
if mark and redis.call('EXISTS', idx) == 0 and queue_live(due, inflight, dead) then
  return {C_IDX_LOST}
end
local ids, mine, recs = entry(tasks, idx, dg, key, iv[1])
local w = tonumber(ARGV[5])
local ms = epoch + w
if w < 0 then ms = now - w - 1 end
if token ~= '' then
  for _, id in ipairs(mine) do
    local t = recs[id]
    if eff_token(t.token, id) == token then
      local st, sc = state_of(due, inflight, dead, id, t)
      if st ~= 'unknown' or cancelled(t) then return {C_DUP, id, st, sc, now} end
      -- in no set (its due entry was lost): due again at when, not a
      -- duplicate in state unknown
      local score, code = assign_score(due, ctr, stats, ms, epoch, mult, maxrel)
      if not score then return {code} end
      add_due(due, wake, id, score)
      redis.call('HINCRBY', stats, 'restored', 1)
      return {C_RESTORED, id, 'pending', score, now}
    end
  end
end
-- the entry cap bounds every script that reads it, even when many keys
-- share the digest
if #mine >= maxper or #ids >= 4 * maxper then return {C_TOO_MANY} end

-- assign_score by hand, so that the ms/seq and the id counter are read in
-- one HMGET and written in one HSET (one call fewer than assign_score plus
-- HINCRBY).
local last = redis.call('HMGET', ctr, 'ms', 'seq', 'req', 'id', 'hw', 'hww')
if not last[4] then
  if queue_live(due, inflight, dead, idx, stats) then return {C_CTR_LOST} end
elseif not string.match(last[4], '^%d+$') then redis.call('HINCRBY', ctr, 'id', 0) end -- raises HINCRBY's error
local st = assigner(due, epoch, mult, maxrel, tonumber(last[1]), tonumber(last[2]), tonumber(last[3]))
local score, code = st.assign(ms)
if not score then return {code} end

local n = (tonumber(last[4]) or 0) + 1
local id = base36(n)
-- F_SOLE marks the only task of its entry; a second task clears the mark.
if #ids > 0 then rec = not_sole(rec) end
if redis.call('HSETNX', tkey(tasks, id), id, rec) == 0 then return {C_CTR_LOST} end
if #ids == 1 then
  local t = recs[ids[1]]
  if t and sole(t) then
    t.flags = t.flags - F_SOLE
    put_rec(tasks, ids[1], build(t))
  end
end
ids[#ids + 1] = id
idx_set(idx, dg, ids)
if mark then redis.call('HSET', idx, IDX_MARK, '1') end
add_due(due, wake, id, score)
redis.call('HSET', ctr, 'id', fmt(n), ctr_last(st))
hw_note(ctr, now, st.hw, last[5], last[6])
if st.overflow > 0 then redis.call('HINCRBY', stats, 'overflow', st.overflow) end
return {C_OK, id, score, now}
