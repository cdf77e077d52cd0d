-- cancel.lua: cancel the tasks of one business key, in any state.
-- KEYS[1] -> idx base   KEYS[2] -> tasks base   KEYS[3] -> due ZSET
-- KEYS[4] -> inflight ZSET   KEYS[5] -> dead ZSET   KEYS[6] -> stats HASH
-- KEYS[7] -> ctr HASH
-- ARGV[1] -> business key   ARGV[2] -> token ('' = every task of the key)
-- ARGV[3] -> index bucket of the key   ARGV[4] -> bucket count
-- Returns {C_OK, pending removed, in flight marked, dead removed, already cancelled}
local idx, tasks, due, inflight, dead, stats = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local key, token, ib = ARGV[1], ARGV[2], ARGV[3]
if not valid_ib(ib) then return {C_CORRUPT} end
if nib_differs(KEYS[7], ARGV[4]) then return {C_INDEX} end
local pending, flying, deadn, already = 0, 0, 0, 0
local keep = {}
for _, id in ipairs(idx_ids(idx, ib, key)) do
  local blob = get_rec(tasks, id)
  local t = parse(blob)
  if blob then
    local eff = ''
    if t then eff = t.token; if eff == '' then eff = id end end
    if token ~= '' and eff ~= token then
      keep[#keep + 1] = id
    elseif redis.call('ZREM', due, id) == 1 then
      redis.call('HDEL', tkey(tasks, id), id)
      pending = pending + 1
    elseif redis.call('ZSCORE', inflight, id) then
      keep[#keep + 1] = id -- its ack, retry or sweep removes it
      if t and not cancelled(t) then
        t.flags = t.flags + 1
        put_rec(tasks, id, build(t))
        flying = flying + 1
      else
        already = already + 1
      end
    elseif redis.call('ZREM', dead, id) == 1 then
      redis.call('HDEL', tkey(tasks, id), id)
      deadn = deadn + 1
    else
      keep[#keep + 1] = id
    end
  end
end
idx_set(idx, ib, key, keep)
if pending + flying + deadn > 0 then redis.call('HINCRBY', stats, 'cancelled', pending + flying + deadn) end
return {C_OK, pending, flying, deadn, already}
