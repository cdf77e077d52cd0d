-- take.lua: atomically take at most N due tasks (due by Redis TIME).
-- KEYS[1] -> due ZSET   KEYS[2] -> inflight ZSET   KEYS[3] -> dead ZSET
-- KEYS[4] -> tasks HASH KEYS[5] -> ctr HASH        KEYS[6] -> stats HASH
-- ARGV[1] -> N (1..1000)   ARGV[2] -> lease ms
-- ARGV[3] -> codec epoch ms   ARGV[4] -> 2^bits
-- Returns {C_OK, now, head due score|'', head lease deadline|'', corrupt count,
--          id1, score1, record1, id2, ...}; each taken task is in inflight
--          with deadline now+lease and a fresh fence in its record.
-- Side effect: stats field 'lat:<b>' counts deliveries whose lateness
-- (Redis TIME minus due ms) has bit length b: b=0 is 0 ms, b≥1 is
-- [2^(b-1), 2^b) ms. Both ends are the server's clock.
local due, inflight, dead, tasks, ctr, stats = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local n, lease = tonumber(ARGV[1]), tonumber(ARGV[2])
local epoch, mult = tonumber(ARGV[3]), tonumber(ARGV[4])
local now = now_ms()
local out = {C_OK, fmt(now), '', '', 0}
local bound = (now - epoch) * mult + mult - 1
if bound >= 0 then
  local items = redis.call('ZRANGEBYSCORE', due, '-inf', fmt(bound), 'WITHSCORES', 'LIMIT', 0, n)
  if #items > 0 then
    local deadline = fmt(now + lease)
    local fence = redis.call('HINCRBY', ctr, 'fence', #items / 2) - #items / 2
    local corrupt, taken = 0, 0
    local lat = {}
    for i = 1, #items, 2 do
      local id = items[i]
      redis.call('ZREM', due, id)
      local blob = redis.call('HGET', tasks, id)
      local t = parse(blob)
      if t then
        fence = fence + 1
        t.attempt = t.attempt + 1
        t.fence = fence
        local rec = rehead(t)
        redis.call('HSET', tasks, id, rec)
        redis.call('ZADD', inflight, deadline, id)
        out[#out + 1] = id
        out[#out + 1] = items[i + 1]
        out[#out + 1] = rec
        taken = taken + 1
        local late = now - (math.floor(tonumber(items[i + 1]) / mult) + epoch)
        local b = 0
        while late > 0 and b < 40 do
          late = math.floor(late / 2)
          b = b + 1
        end
        lat[b] = (lat[b] or 0) + 1
      elseif blob then
        -- unreadable record: park it in dead so it never blocks the head
        redis.call('ZADD', dead, fmt(now), id)
        corrupt = corrupt + 1
      end
    end
    if corrupt > 0 then redis.call('HINCRBY', stats, 'corrupt', corrupt) end
    if taken > 0 then redis.call('HINCRBY', stats, 'delivered', taken) end
    for b, c in pairs(lat) do redis.call('HINCRBY', stats, 'lat:' .. b, c) end
    out[5] = corrupt
  end
end
local h = redis.call('ZRANGE', due, 0, 0, 'WITHSCORES')
if h[2] then out[3] = h[2] end
h = redis.call('ZRANGE', inflight, 0, 0, 'WITHSCORES')
if h[2] then out[4] = h[2] end
return out
