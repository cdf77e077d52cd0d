-- take.lua: atomically take at most N due tasks (due by Redis TIME), with
-- bulk Redis calls (one ZREMRANGEBYRANK and ZADD per batch, one HMGET and HSET per
-- tasks bucket, not per task).
-- KEYS[1] -> due ZSET   KEYS[2] -> inflight ZSET   KEYS[3] -> dead ZSET
-- KEYS[4] -> tasks base KEYS[5] -> ctr HASH        KEYS[6] -> stats HASH
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
    -- the m taken are exactly ranks 0..m-1 (LIMIT 0 n from -inf): removing
    -- them by rank passes no members, which costs far less than ZREM
    redis.call('ZREMRANGEBYRANK', due, 0, m - 1)
    local blobs = get_recs(tasks, ids)
    local deadline = fmt(now + lease)
    local fence = redis.call('HINCRBY', ctr, 'fence', m) - m
    local recs, leases, parked, lat = {}, {}, {}, {}
    local taken, r, o, np = 0, 0, 5, 0
    local atext = {} -- attempt numbers as text, memoized (few distinct values)
    local nowrel = now - epoch
    for i = 1, m do
      local id, sc, blob = ids[i], items[2 * i], blobs[i]
      local a, _, p3 = header(blob)
      if a then
        a = tonumber(a)
        fence = fence + 1
        local at = atext[a]
        if not at then
          at = fmt(a + 1) .. ','
          atext[a] = at
        end
        local rec = at .. fmt(fence) .. ',' .. string.sub(blob, p3)
        recs[r + 1] = id
        recs[r + 2] = rec
        leases[r + 1] = deadline
        leases[r + 2] = id
        r = r + 2
        out[o + 1] = id
        out[o + 2] = sc
        out[o + 3] = rec
        o = o + 3
        taken = taken + 1
        -- bit length of the lateness in ms: frexp's exponent (0 for 0 ms)
        local late = nowrel - math.floor(tonumber(sc) / mult)
        local b = 0
        if late > 0 then
          local _, e = math.frexp(late)
          b = e
          if b > 40 then b = 40 end
        end
        lat[b] = (lat[b] or 0) + 1
      elseif blob then
        -- unreadable record: park it in dead so it never blocks the head
        parked[np + 1] = fmt(now)
        parked[np + 2] = id
        np = np + 2
      end
    end
    if taken > 0 then
      put_recs(tasks, recs)
      redis.call('ZADD', inflight, unpack(leases))
      redis.call('HINCRBY', stats, 'delivered', taken)
    end
    if np > 0 then
      redis.call('ZADD', dead, unpack(parked))
      redis.call('HINCRBY', stats, 'corrupt', np / 2)
    end
    for b, c in pairs(lat) do redis.call('HINCRBY', stats, 'lat:' .. b, c) end
    out[5] = np / 2
  end
end
local h = redis.call('ZRANGE', due, 0, 0, 'WITHSCORES')
if h[2] then out[3] = h[2] end
h = redis.call('ZRANGE', inflight, 0, 0, 'WITHSCORES')
if h[2] then out[4] = h[2] end
return out
