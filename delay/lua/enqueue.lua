-- enqueue.lua: idempotent enqueue of one task.
-- KEYS[1] -> due ZSET        KEYS[2] -> inflight ZSET   KEYS[3] -> dead ZSET
-- KEYS[4] -> tasks HASH      KEYS[5] -> idx HASH        KEYS[6] -> ctr HASH
-- KEYS[7] -> stats HASH      KEYS[8] -> wake LIST
-- ARGV[1] -> business key    ARGV[2] -> token ('' = generate: the token is the ID)
-- ARGV[3] -> payload         ARGV[4] -> 'at' | 'after'
-- ARGV[5] -> at: absolute Unix ms; after: delay ms from Redis TIME
-- ARGV[6] -> codec epoch ms  ARGV[7] -> 2^bits   ARGV[8] -> codec max ms offset
-- ARGV[9] -> max tasks per business key
-- Returns {C_OK, id, score, now} | {C_DUP, id, state, score, now} | {code}
local due, inflight, dead, tasks, idx, ctr, stats, wake =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local key, token, payload = ARGV[1], ARGV[2], ARGV[3]
local epoch, mult, maxrel = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local now = now_ms()

local ids, live = idx_ids(idx, key), {}
for _, id in ipairs(ids) do
  local blob = redis.call('HGET', tasks, id)
  if blob then
    live[#live + 1] = id -- IDs whose record is gone are stale and dropped
    local t = parse(blob)
    if t and token ~= '' then
      local eff = t.token
      if eff == '' then eff = id end
      if eff == token then
        local st, sc = state_of(due, inflight, dead, id, t)
        return {C_DUP, id, st, sc, fmt(now)}
      end
    end
  end
end
if #live >= tonumber(ARGV[9]) then return {C_TOO_MANY} end

local ms = tonumber(ARGV[5])
if ARGV[4] == 'after' then ms = now + ms end
local score, code = assign_score(due, ctr, stats, ms, epoch, mult, maxrel)
if not score then return {code} end

local id = base36(redis.call('HINCRBY', ctr, 'id', 1))
redis.call('HSET', tasks, id, build({attempt = 0, fence = 0, flags = 0, key = key, token = token, err = '', payload = payload}))
live[#live + 1] = id
idx_set(idx, key, live)
add_due(due, wake, id, score)
return {C_OK, id, fmt(score), fmt(now)}
