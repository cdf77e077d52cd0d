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
local mv = mover(due, inflight, dead, ctr, stats, wake, epoch, mult, maxrel, ms)
local _, mine, recs = entry(tasks, idx, dg, key)
for _, id in ipairs(mine) do
  if token == '' or eff_token(recs[id].token, id) == token then
    local c = mv.put(id)
    if c then return {c} end
  end
end
return mv.finish()
