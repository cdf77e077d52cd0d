-- lookup.lua: the tasks of one business key with their state.
-- KEYS[1] -> idx HASH   KEYS[2] -> tasks HASH   KEYS[3] -> due ZSET
-- KEYS[4] -> inflight ZSET   KEYS[5] -> dead ZSET
-- ARGV[1] -> business key
-- Returns {C_OK, now, id1, state1, score1, record1, ...} (at most the per-key cap)
local out = {C_OK, fmt(now_ms())}
for _, id in ipairs(idx_ids(KEYS[1], ARGV[1])) do
  local blob = redis.call('HGET', KEYS[2], id)
  if blob then
    local st, sc = state_of(KEYS[3], KEYS[4], KEYS[5], id, parse(blob))
    out[#out + 1] = id
    out[#out + 1] = st
    out[#out + 1] = sc
    out[#out + 1] = blob
  end
end
return out
