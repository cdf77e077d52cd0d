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
local mv = mover(due, inflight, dead, ctr, stats, wake, epoch, mult, maxrel, ms)
local seen = {}
for i = 6, #ARGV do
  local id = ARGV[i]
  if not seen[id] then
    seen[id] = true
    -- an ID whose record is gone (finished or removed) moves nothing
    if get_rec(tasks, id) then
      local c = mv.put(id)
      if c then return {c} end
    end
  end
end
return mv.finish()
