-- lookup.lua: the tasks of one business key with their state, and the
-- unreadable records of its index entry (whose key cannot be told).
-- KEYS[1] -> idx HASH   KEYS[2] -> tasks base   KEYS[3] -> due ZSET
-- KEYS[4] -> inflight ZSET   KEYS[5] -> dead ZSET
-- ARGV[1] -> business key   ARGV[2] -> its digest
-- Returns {C_OK, now, id1, state1, score1, record1, ...} (at most the entry cap)
local out = {C_OK, fmt(now_ms())}
local ids, _, recs = entry(KEYS[2], KEYS[1], ARGV[2], ARGV[1])
for _, id in ipairs(ids) do
  local t = recs[id]
  if not t or t.key == ARGV[1] then
    local st, sc = state_of(KEYS[3], KEYS[4], KEYS[5], id, t or nil)
    out[#out + 1] = id
    out[#out + 1] = st
    out[#out + 1] = sc
    -- entry read the record; an unreadable one is read again for the reply
    out[#out + 1] = t and t.blob or get_rec(KEYS[2], id)
  end
end
return out
