-- workers.lua: the live pools of one server and key prefix, with their
-- last heartbeat and Redis TIME, so that a reader computes each entry's
-- age on the server's clock, not its own. IDs whose entry expired leave
-- the live set here, in the same script that found them gone, so a pool
-- that beats again meanwhile is never dropped. Not wrapped by once: it
-- only drops what is already gone.
-- KEYS[1] -> live ZSET   KEYS[2] -> entry base <prefix>:{workers}:w:
--            (an entry is the base followed by the pool ID)
-- Returns {C_OK, now, id1, beat1, entry1, ...}: each live pool's ID, last
--          heartbeat (Unix ms, Redis TIME) and WorkerInfo JSON, by ID.
local live, base = KEYS[1], KEYS[2]
local out = {C_OK, now_ms()}
local ids = redis.call('ZRANGE', live, 0, -1, 'WITHSCORES')
local gone = {}
for i = 1, #ids, 2 do
  local v = redis.call('GET', base .. ids[i])
  if v then
    out[#out + 1] = ids[i]
    out[#out + 1] = ids[i + 1]
    out[#out + 1] = v
  else
    gone[#gone + 1] = ids[i]
  end
end
for i = 1, #gone, 500 do
  redis.call('ZREM', live, unpack(gone, i, math.min(i + 499, #gone)))
end
return out
