-- enqueue.lua: idempotent enqueue of one task.
-- KEYS[1] -> due ZSET        KEYS[2] -> inflight ZSET   KEYS[3] -> dead ZSET
-- KEYS[4] -> tasks base      KEYS[5] -> idx base        KEYS[6] -> ctr HASH
-- KEYS[7] -> stats HASH      KEYS[8] -> wake LIST
-- ARGV[1] -> business key    ARGV[2] -> token ('' = generate: the token is the ID)
-- ARGV[3] -> payload         ARGV[4] -> 'at' | 'after'
-- ARGV[5] -> at: absolute Unix ms; after: delay ms from Redis TIME
-- ARGV[6] -> codec epoch ms  ARGV[7] -> 2^bits   ARGV[8] -> codec max ms offset
-- ARGV[9] -> max tasks per business key
-- ARGV[10] -> index bucket of the business key   ARGV[11] -> bucket count
-- Returns {C_OK, id, score, now} | {C_DUP, id, state, score, now} | {code}
-- (new scores and now as integer replies, exact below 2^53)
local due, inflight, dead, tasks, idx, ctr, stats, wake =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local key, token, payload = ARGV[1], ARGV[2], ARGV[3]
local epoch, mult, maxrel = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local ib = ARGV[10]
if not valid_ib(ib) then return {C_CORRUPT} end
local now = now_ms()

local ids, live, recs = idx_ids(idx, ib, key), {}, {}
for _, id in ipairs(ids) do
  local blob = get_rec(tasks, id)
  if blob then
    live[#live + 1] = id -- IDs whose record is gone are stale and dropped
    local t = parse(blob)
    recs[#live] = t
    if t and token ~= '' then
      local eff = t.token
      if eff == '' then eff = id end
      if eff == token then
        local st, sc = state_of(due, inflight, dead, id, t)
        return {C_DUP, id, st, sc, now}
      end
    end
  end
end
if #live >= tonumber(ARGV[9]) then return {C_TOO_MANY} end

local ms = tonumber(ARGV[5])
if ARGV[4] == 'after' then ms = now + ms end
-- assign_score by hand, so that the ms/seq and the id counter are read in
-- one HMGET and written in one HSET (one call fewer than assign_score plus
-- HINCRBY).
local last = redis.call('HMGET', ctr, 'ms', 'seq', 'id', 'nib')
if last[4] and last[4] ~= ARGV[11] then return {C_INDEX} end
if last[3] and not string.match(last[3], '^%d+$') then redis.call('HINCRBY', ctr, 'id', 0) end -- raises HINCRBY's error
local st = assigner(due, epoch, mult, maxrel, tonumber(last[1]), tonumber(last[2]))
local score, code = st.assign(ms)
if not score then return {code} end

local n = (tonumber(last[3]) or 0) + 1
local id = base36(n)
-- a fresh record, as build() writes it: attempt, fence, flags, no error.
-- F_SOLE marks the only task of its key; a second task clears the mark.
local flags = '0'
if #live == 0 then flags = '2' end
if #live == 1 and recs[1] and sole(recs[1]) then
  recs[1].flags = recs[1].flags - F_SOLE
  put_rec(tasks, live[1], build(recs[1]))
end
put_rec(tasks, id, '0,0,' .. flags .. ',' .. ib .. ',' .. #key .. ',' .. #token .. ',0;' .. key .. token .. payload)
live[#live + 1] = id
idx_set(idx, ib, key, live)
add_due(due, wake, id, score)
redis.call('HSET', ctr, 'ms', fmt(st.ms), 'seq', fmt(st.seq), 'id', fmt(n), 'nib', ARGV[11])
if st.overflow > 0 then redis.call('HINCRBY', stats, 'overflow', st.overflow) end
return {C_OK, id, score, now}
