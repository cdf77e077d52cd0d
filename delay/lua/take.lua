-- take.lua: atomically take at most N due tasks (due by Redis TIME), with
-- bulk Redis calls (one ZREM, HMGET, HSET and ZADD per batch, not per task).
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
  local m = #items / 2
  if m > 0 then
    local ids = {}
    for i = 1, m do ids[i] = items[2 * i - 1] end
    redis.call('ZREM', due, unpack(ids))
    local blobs = redis.call('HMGET', tasks, unpack(ids))
    local deadline = fmt(now + lease)
    local fence = redis.call('HINCRBY', ctr, 'fence', m) - m
    local recs, leases, parked = {}, {}, {}
    local lat = {}
    local taken = 0
    for i = 1, m do
      local id, sc = ids[i], items[2 * i]
      local t = parse(blobs[i])
      if t then
        fence = fence + 1
        t.attempt = t.attempt + 1
        t.fence = fence
        local rec = rehead(t)
        recs[#recs + 1] = id
        recs[#recs + 1] = rec
        leases[#leases + 1] = deadline
        leases[#leases + 1] = id
        out[#out + 1] = id
        out[#out + 1] = sc
        out[#out + 1] = rec
        taken = taken + 1
        local late = now - (math.floor(tonumber(sc) / mult) + epoch)
        local b = 0
        while late > 0 and b < 40 do
          late = math.floor(late / 2)
          b = b + 1
        end
        lat[b] = (lat[b] or 0) + 1
      elseif blobs[i] then
        -- unreadable record: park it in dead so it never blocks the head
        parked[#parked + 1] = fmt(now)
        parked[#parked + 1] = id
      end
    end
    if taken > 0 then
      redis.call('HSET', tasks, unpack(recs))
      redis.call('ZADD', inflight, unpack(leases))
      redis.call('HINCRBY', stats, 'delivered', taken)
    end
    if #parked > 0 then
      redis.call('ZADD', dead, unpack(parked))
      redis.call('HINCRBY', stats, 'corrupt', #parked / 2)
    end
    for b, c in pairs(lat) do redis.call('HINCRBY', stats, 'lat:' .. b, c) end
    out[5] = #parked / 2
  end
end
local h = redis.call('ZRANGE', due, 0, 0, 'WITHSCORES')
if h[2] then out[3] = h[2] end
h = redis.call('ZRANGE', inflight, 0, 0, 'WITHSCORES')
if h[2] then out[4] = h[2] end
return out
