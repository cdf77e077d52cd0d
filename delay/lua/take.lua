-- take.lua: atomically take at most N due tasks (due by Redis TIME), with
-- bulk Redis calls (one ZREMRANGEBYRANK, ZADD and lease HSET per batch, one
-- HMGET per tasks bucket, not per task). Records are not rewritten: a
-- delivery's fence lives in the lease hash. The queue's ctl hash gates it:
-- a paused queue gives nothing, and a rate limit (a token bucket) caps N.
-- KEYS[1] -> due ZSET   KEYS[2] -> inflight ZSET   KEYS[3] -> dead ZSET
-- KEYS[4] -> tasks base KEYS[5] -> ctr HASH        KEYS[6] -> stats HASH
-- KEYS[7] -> lease HASH   KEYS[8] -> done ZSET     KEYS[9] -> ctl HASH
-- ARGV[1] -> N (1..1000)   ARGV[2] -> lease ms
-- ARGV[3] -> codec epoch ms   ARGV[4] -> 2^bits
-- Returns {C_OK | C_PAUSED, now, head due score|'', the earliest lease
--          deadline or tombstone end (Unix ms, what the next sweep is
--          for)|'', parked count | {parked, lost}, fence, gate, id1,
--          score1, record1, id2, ...}; each task
--          returned is in inflight with deadline now+lease under fence.
--          C_PAUSED: the queue is paused (ctl 'paused'), nothing was
--          taken, and gate is the pause's start (Unix ms). C_OK: gate is
--          '' unless a rate limit left less than one token, then it is
--          when the next token comes (Unix ms): a taker waits for it.
--          One fence serves the whole batch: a fence must differ between
--          two deliveries of one task, and those are two takes. Records
--          that do not start with a flags digit are parked in dead and
--          counted; Go checks the rest and dead-letters what it cannot
--          read (kill.lua parks an unreadable record). A due ID whose
--          record is gone (lost: an evicted bucket) goes to dead too,
--          counted in stats 'lost' and in the reply, never dropped.
-- Rate limit: ctl 'rate' tokens a second, at most 'burst' held; 'tok'
-- and 'ts' are the tokens left after the last take that took some and
-- its Redis TIME (absent: a full bucket). A take refills by the time
-- passed, takes at most the whole tokens and pays one per task handed
-- out, so over any window W the queue hands out at most rate*W + burst;
-- burst counts as at most MaxBatch, and a token wait as at most a day.
-- A fence counter that starts anew (ctr gone) in a queue that delivered
-- before (stats, leases) starts from Redis TIME in µs, past any fence a
-- consumer may still hold: a counter grows by one a take, slower than the clock.
-- Side effect: stats field 'lat:<b>' counts deliveries whose lateness
-- (Redis TIME minus due ms) has bit length b: b=0 is 0 ms, b>=1 is
-- [2^(b-1), 2^b) ms. Both ends are the server's clock.
local due, inflight, dead, tasks, ctr, stats, lease =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local n, leasems = tonumber(ARGV[1]), tonumber(ARGV[2])
local epoch, mult = tonumber(ARGV[3]), tonumber(ARGV[4])
local now = now_ms()
local out = {C_OK, now, '', '', 0, 0, ''}
local bound = (now - epoch) * mult + mult - 1
local gate = redis.call('HMGET', KEYS[9], 'paused', 'rate', 'burst', 'tok', 'ts')
local rate, tok
local TOKEN_EPS = 1e-6
-- MAX_BURST is MaxBatch, MAX_TOKEN_WAIT_MS maxTokenWait (1/MinRatePerSecond):
-- whatever a ctl hash holds (an older writer's burst of 2,000, a rate of
-- 1e-17), no take holds more than MAX_BURST tokens and the wait it
-- replies is a whole number of ms at most a day, never a float past
-- 2^63 that %d would turn negative (a taker that read "no wait" spun)
local MAX_BURST, MAX_TOKEN_WAIT_MS = 1000, 86400000
local function token_at(tok)
  local w = (1 - tok) * 1000 / rate - TOKEN_EPS
  if not (w < MAX_TOKEN_WAIT_MS) then return now + MAX_TOKEN_WAIT_MS end -- NaN too
  return now + math.max(0, math.ceil(w))
end
if gate[1] then
  out[1], out[7], bound = C_PAUSED, gate[1], -1
elseif gate[2] then
  -- a rate that is not above 0 (a stray write's -1: its refill would
  -- drain the bucket and its wait come out negative, read as no wait, a
  -- spin) earns no tokens, so its wait is a day
  rate = tonumber(gate[2])
  if not (rate and rate > 0) then rate = 0 end
  local burst = math.min(MAX_BURST, tonumber(gate[3]) or 1)
  tok = math.min(burst, tonumber(gate[4]) or burst)
  -- a stray write's -inf or NaN would stay so through every refill, and
  -- without a 'ts' no take would ever refill: the queue would never take
  -- again, even after SetRate. Read as 0 at this take, and stored so when
  -- this take hands out nothing (the only write of a take that does not)
  local ts = tonumber(gate[5])
  local stray = not (tok > -1) or not ts
  if not (tok > -1) then tok = 0 end
  ts = ts or now
  if now > ts then tok = math.min(burst, tok + (now - ts) * rate / 1000) end
  -- TOKEN_EPS absorbs the rounding of the fractions: 0.99 + 0.01 is a
  -- token, and the next one is due at the ms it completes, not one after
  n = math.min(n, math.floor(tok + TOKEN_EPS))
  if n < 1 then
    out[7] = fmt(token_at(tok))
    bound = -1
    if stray then
      redis.call('HSET', KEYS[9], 'tok', string.format('%.17g', tok), 'ts', fmt(now))
    end
  end
end
if bound >= 0 then
  local items = redis.call('ZRANGEBYSCORE', due, '-inf', fmt(bound), 'WITHSCORES', 'LIMIT', '0', fmt(n))
  local m = #items / 2
  if m > 0 then
    local ids = {}
    for i = 1, m do ids[i] = items[2 * i - 1] end
    -- the m taken are exactly ranks 0..m-1 (LIMIT 0 n from -inf): removing
    -- them by rank passes no members, which costs far less than ZREM
    redis.call('ZREMRANGEBYRANK', due, '0', fmt(m - 1))
    local blobs = get_recs(tasks, ids)
    -- as text, once: redis.call would format a number anew for each task
    -- (%.17g, about 1.7 µs for numbers this size)
    local deadline = fmt(now + leasems)
    local f = redis.call('HINCRBY', ctr, 'fence', 1)
    if f == 1 and queue_live(inflight, lease, KEYS[6]) then
      f = (now + 1) * 1000
      redis.call('HSET', ctr, 'fence', fmt(f))
    end
    local fence = fmt(f)
    out[6] = fence
    local leases, fences, parked, skip = {}, {}, {}, {}
    local taken, r, o, np, nl = 0, 0, 7, 0, 0
    for i = 1, m do
      local id, blob = ids[i], blobs[i]
      local b = blob and string.byte(blob, 1) -- flags_of, inline: a call a task cost 1%
      if b and b >= 48 and b <= 57 then
        taken = taken + 1
        leases[r + 1] = deadline
        leases[r + 2] = id
        fences[r + 1] = id
        fences[r + 2] = fence
        r = r + 2
        out[o + 1] = id
        out[o + 2] = items[2 * i]
        out[o + 3] = blob
        o = o + 3
      else
        skip[#skip + 1] = i
        -- unreadable: park it in dead so it never blocks the head; a
        -- record gone is parked too, so the loss shows in dead and stats
        parked[np + 1] = now
        parked[np + 2] = id
        np = np + 2
        if not blob then nl = nl + 1 end
      end
    end
    if taken > 0 then
      redis.call('ZADD', inflight, unpack(leases))
      redis.call('HSET', lease, unpack(fences))
      redis.call('HINCRBY', stats, 'delivered', taken)
      -- lateness histogram: items come in score order, so their buckets
      -- never rise along the batch; count the runs by bisection, with a
      -- few score reads instead of one per task
      local nowrel, lat = now - epoch, {}
      local function bucket(i)
        local late = nowrel - math.floor(tonumber(items[2 * i]) / mult)
        if late <= 0 then return 0 end
        local _, e = math.frexp(late)
        if e > 40 then e = 40 end
        return e
      end
      local function add(b, c) lat[b] = (lat[b] or 0) + c end
      local function runs(lo, hi, blo, bhi)
        if blo == bhi then add(blo, hi - lo + 1) return end
        if hi - lo == 1 then add(blo, 1) add(bhi, 1) return end
        local mid = math.floor((lo + hi) / 2)
        local bm = bucket(mid)
        runs(lo, mid, blo, bm)
        add(bm, -1) -- mid is in both halves
        runs(mid, hi, bm, bhi)
      end
      runs(1, m, bucket(1), bucket(m))
      for _, i in ipairs(skip) do add(bucket(i), -1) end
      for b, c in pairs(lat) do
        if c ~= 0 then redis.call('HINCRBY', stats, 'lat:' .. b, c) end
      end
    end
    if rate and taken > 0 then
      tok = tok - taken
      redis.call('HSET', KEYS[9], 'tok', string.format('%.17g', tok), 'ts', fmt(now))
      if tok + TOKEN_EPS < 1 then out[7] = fmt(token_at(tok)) end
    end
    if np > 0 then
      redis.call('ZADD', dead, unpack(parked))
      if np / 2 > nl then redis.call('HINCRBY', stats, 'corrupt', np / 2 - nl) end
      if nl > 0 then redis.call('HINCRBY', stats, 'lost', nl) end
    end
    out[5] = np / 2 - nl
    if nl > 0 then out[5] = {np / 2 - nl, nl} end
    -- every task taken: the kept reply's ID and score pairs are items as
    -- they are, handed to take_keep in out[0] (no part of the reply: Redis
    -- reads an array from 1); it joins them without a copy of its own
    if np == 0 then out[0] = items end
  end
end
local h = redis.call('ZRANGE', due, '0', '0', 'WITHSCORES')
if h[2] then out[3] = h[2] end
h = redis.call('ZRANGE', inflight, '0', '0', 'WITHSCORES')
if h[2] then out[4] = h[2] end
h = redis.call('ZRANGE', KEYS[8], '0', '0', 'WITHSCORES')
if h[2] and (out[4] == '' or tonumber(h[2]) < tonumber(out[4])) then out[4] = h[2] end
return out
