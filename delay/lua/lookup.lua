-- lookup.lua: the tasks of one business key with their state.
-- KEYS[1] -> idx base   KEYS[2] -> tasks base   KEYS[3] -> due ZSET
-- KEYS[4] -> inflight ZSET   KEYS[5] -> dead ZSET   KEYS[6] -> ctr HASH
-- ARGV[1] -> business key   ARGV[2] -> its index bucket   ARGV[3] -> bucket count
-- Returns {C_OK, now, id1, state1, score1, record1, ...} (at most the per-key cap)
if not valid_ib(ARGV[2]) then return {C_CORRUPT} end
if nib_differs(KEYS[6], ARGV[3]) then return {C_INDEX} end
local out = {C_OK, fmt(now_ms())}
for _, id in ipairs(idx_ids(KEYS[1], ARGV[2], ARGV[1])) do
  local blob = get_rec(KEYS[2], id)
  if blob then
    local st, sc = state_of(KEYS[3], KEYS[4], KEYS[5], id, parse(blob))
    out[#out + 1] = id
    out[#out + 1] = st
    out[#out + 1] = sc
    out[#out + 1] = blob
  end
end
return out
