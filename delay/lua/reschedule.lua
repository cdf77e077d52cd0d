-- reschedule.lua: move the pending tasks of one business key to a new due time.
-- All or nothing: every new score is found before the first write, with
-- the tasks still where they are, so an error leaves each task exactly as
-- it was (due set, record, index, counters).
-- KEYS[1] -> idx HASH   KEYS[2] -> tasks base   KEYS[3] -> due ZSET
-- KEYS[4] -> inflight ZSET   KEYS[5] -> dead ZSET   KEYS[6] -> ctr HASH
-- KEYS[7] -> stats HASH   KEYS[8] -> wake LIST
-- ARGV[1] -> business key   ARGV[2] -> token ('' = every task of the key)
-- ARGV[3] -> 'at' | 'after'   ARGV[4] -> Unix ms | delay ms
-- ARGV[5] -> codec epoch ms   ARGV[6] -> 2^bits   ARGV[7] -> codec max ms offset
-- ARGV[8] -> digest of the key
-- Returns {C_OK, pending moved, in flight (untouched), dead (untouched), new score|''}
--       | {C_BEFORE_EPOCH|C_RANGE|C_SEQ} (nothing moved)
local idx, tasks, due, inflight, dead, ctr, stats, wake =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local key, token, dg = ARGV[1], ARGV[2], ARGV[8]
local epoch, mult, maxrel = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local now = now_ms()
local ms = tonumber(ARGV[4])
if ARGV[3] == 'after' then ms = now + ms end
if ms - epoch < 0 then return {C_BEFORE_EPOCH} end
if ms - epoch > maxrel then return {C_RANGE} end
local flying, deadn, last = 0, 0, ''
local _, mine, recs = entry(tasks, idx, dg, key)
local st, moves, head, headid = nil, {}, nil, nil
for _, id in ipairs(mine) do
  if token == '' or eff_token(recs[id].token, id) == token then
    if redis.call('ZSCORE', due, id) then
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
