-- cancel.lua: cancel the tasks of one business key, in any state.
-- KEYS[1] -> idx HASH   KEYS[2] -> tasks base   KEYS[3] -> due ZSET
-- KEYS[4] -> inflight ZSET   KEYS[5] -> dead ZSET   KEYS[6] -> stats HASH
-- ARGV[1] -> business key   ARGV[2] -> token ('' = every task of the key)
-- ARGV[3] -> digest of the key
-- Returns {C_OK, pending removed, in flight marked, dead removed, already cancelled}
local idx, tasks, due, inflight, dead, stats = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local key, token, dg = ARGV[1], ARGV[2], ARGV[3]
local pending, flying, deadn, already = 0, 0, 0, 0
local keep = {} -- what stays in the entry: other keys' tasks, other tokens, in flight
local ids, _, recs = entry(tasks, idx, dg, key)
for _, id in ipairs(ids) do
  local t = recs[id]
  if not t or t.key ~= key or (token ~= '' and eff_token(t.token, id) ~= token) then
    keep[#keep + 1] = id
  elseif redis.call('ZREM', due, id) == 1 then
    redis.call('HDEL', tkey(tasks, id), id)
    pending = pending + 1
  elseif redis.call('ZSCORE', inflight, id) then
    keep[#keep + 1] = id -- its ack, retry or sweep removes it
    if not cancelled(t) then
      t.flags = t.flags + F_CANCELLED
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
idx_set(idx, dg, keep)
if pending + flying + deadn > 0 then redis.call('HINCRBY', stats, 'cancelled', pending + flying + deadn) end
return {C_OK, pending, flying, deadn, already}
