-- Code generated from lib.lua + reply.lua + take_kept.lua + take.lua by `go generate ./delay`; DO NOT EDIT.
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

-- lib.lua: helpers shared by every delay script. go generate ./delay
-- prepends this file's prelude and the functions a body uses to that body
-- (lua/gen), so it declares no KEYS/ARGV of its own.
--
-- Records are bucketed: the tasks key a script gets in KEYS is a base name,
-- and a record lives in the hash <tasks>:<task ID minus its last base-36
-- digit> (36 consecutive IDs per bucket). Small hashes stay
-- listpack-encoded, which is what keeps a pending task near 200 B; a
-- bucket name keeps the base key's hash tag, so every key a script touches
-- is still on the slot of its KEYS.
--
-- Reverse index: one hash, field = the business key's digest (6
-- characters, computed in Go, stored in each record), value = the
-- comma-separated IDs of the tasks of every key with that digest. Keys
-- rarely share a digest, and whoever reads an entry tells its keys apart
-- by the key in each record.
--
-- Task record (one field of a tasks bucket, field = task ID):
--   "<flags><digest><attempt>,<keylen>,<toklen>,<errlen>;<key><token><err><payload>"
-- flags is one digit: bit 1 (F_CANCELLED) = cancelled while in flight; bit
-- 2 (F_SOLE) = the only task of its index entry, so the entry is exactly
-- its ID (delete_task drops the entry without reading it). digest is the key's,
-- DIGEST_LEN characters: both sit at fixed places, so the hot paths read
-- them without a pattern match. attempt counts the deliveries that ended
-- without an ack (retry, expired lease); the delivery in hand is attempt+1.
-- toklen 0 means the token is the ID. Fresh records are built in Go
-- (freshRecord), with F_SOLE set.
--
-- Leases: the lease hash maps each task in flight to the fence of its
-- current delivery (the inflight ZSET has its deadline). Take writes the
-- two and leaves the record alone: a record changes only when its task
-- does (retry, expiry, cancel), not on every delivery.
-- Scores: (ms - epoch) * mult + seq, mult = 2^bits, exactly score.TimeCodec.
-- Return codes (mirrored in scripts.go, compared by TestLibConstantsMatchGo):
local C_OK, C_DUP, C_NOT_FOUND, C_LEASE_LOST = 0, 1, 2, 3
local C_BEFORE_EPOCH, C_RANGE, C_TOO_MANY, C_SEQ = 4, 5, 6, 7
local C_CORRUPT, C_CANCELLED, C_DEAD = 8, 9, 10
-- C_CTR_LOST: the ID counter is gone (or behind a record) while the queue
-- holds tasks; C_IDX_LOST: the index is gone while it does; C_RESTORED: a
-- record found in no set was put back in due. Refusals write nothing.
local C_CTR_LOST, C_IDX_LOST, C_RESTORED = 11, 12, 13
-- C_PAUSED: take found the queue paused (the ctl hash's 'paused') and
-- took nothing.
local C_PAUSED = 14
local F_CANCELLED, F_SOLE, F_DONE = 1, 2, 4
local DIGEST_LEN = 6 -- digestLen in keys.go
local BUCKET_IDS = 36 -- the IDs one tasks bucket can hold (the last digit)
-- The index holds a marker field IDX_MARK (no digest has it) from the
-- first enqueue on, read in the same HMGET as the entries: an index
-- without it is new, or gone (checked then), at no cost on the hot path.
local IDX_MARK = '~'
-- The high-water mark of the per-ms score space (hw_note) is kept per
-- window of this many ms of Redis TIME (highWaterWindowMs in Go).
local HIGH_WATER_WINDOW_MS = 60000
-- A record's err field keeps its task's last ERRS_KEPT error texts,
-- oldest first, each as ERR_MARK <len> ':' <text>, the oldest dropped
-- while they add up to more than ERRS_BYTES (the newest is always kept;
-- Go caps one text at 1024 bytes). One text that does not start with
-- ERR_MARK is stored bare, as every record before this list was, so a
-- bare field is that one text.
local ERRS_KEPT, ERRS_BYTES = 3, 2048 -- errsKept, errsBytes in record.go
local ERR_MARK = '\030'
local DG = '[%w_%-][%w_%-][%w_%-][%w_%-][%w_%-][%w_%-]'
local HEADER = '^(%d)(' .. DG .. ')(%d+),(%d+),(%d+),(%d+);()'

local function fmt(n) return string.format('%d', n) end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- flags_of reads the flags digit of a record (nil: not a digit), and
-- dg_of its digest, from their fixed places.
local function flags_of(blob)
  local b = string.byte(blob, 1)
  if b and b >= 48 and b <= 57 then return b - 48 end
  return nil
end
local function dg_of(blob) return string.sub(blob, 2, 1 + DIGEST_LEN) end

-- group returns the list groups[k], making it (and noting k in order)
-- on first sight: the per-bucket batching of every bulk call.
local function group(groups, order, k)
  local g = groups[k]
  if not g then
    g = {}
    groups[k] = g
    order[#order + 1] = k
  end
  return g
end

-- buckets groups positions of ids (the IDs themselves, with as_ids) by
-- tasks bucket (the bucket key), in first-seen order; each group's length
-- is its n. Runs of IDs from one bucket (the common case: IDs are handed
-- out in order) cost one lookup and one key per run, not per ID.
local function buckets(tasks, ids, as_ids)
  local groups, order = {}, {}
  local last, g, k = nil, nil, 0
  for i = 1, #ids do
    local pre = string.sub(ids[i], 1, -2)
    if pre ~= last then
      if g then g.n = k end
      last = pre
      local bk = tasks .. ':' .. pre
      g = groups[bk]
      if g then
        k = g.n
      else
        g, k = {}, 0
        groups[bk] = g
        order[#order + 1] = bk
      end
    end
    k = k + 1
    if as_ids then g[k] = ids[i] else g[k] = i end
  end
  if g then g.n = k end
  return groups, order
end

-- get_recs reads the records of ids (false where absent) with one HMGET per
-- bucket: consecutive IDs share a bucket, so a batch costs a few calls.
-- A bucket asked for BUCKET_IDS IDs (all it can hold, unless some repeat)
-- is read whole with HGETALL instead: HMGET scans the bucket's listpack
-- from its start for each field, which cost 2,200 instructions a task in
-- take, where one pass hands over every record. Its records come in
-- insertion order, which is ID order unless a task was put back, so they
-- are matched in step and looked up by field only past a mismatch.
local function get_recs(tasks, ids)
  local out = {}
  local groups, order = buckets(tasks, ids)
  for _, k in ipairs(order) do
    local g = groups[k]
    if g.n == BUCKET_IDS then
      local kv, p, byf = redis.call('HGETALL', k), 1, nil
      for j = 1, BUCKET_IDS do
        local at, id = g[j], ids[g[j]]
        if kv[p] == id then
          out[at] = kv[p + 1]
          p = p + 2
        else
          if not byf then
            byf = {}
            for x = 1, #kv, 2 do byf[kv[x]] = kv[x + 1] end
          end
          out[at] = byf[id] or false
        end
      end
    else
      local f = {}
      for j = 1, g.n do f[j] = ids[g[j]] end
      local vals = redis.call('HMGET', k, unpack(f))
      for j = 1, g.n do out[g[j]] = vals[j] end
    end
  end
  return out
end

-- queue_live tells whether the queue holds tasks (any of its sets
-- given exists): a missing counter or index then means it was lost, not that
-- the queue is new. Called only on those rare paths.
local function queue_live(...)
  return redis.call('EXISTS', ...) > 0
end

-- end of lib.lua
-- reply.lua: the kept reply of a mutating script. A call whose reply was
-- lost is sent again (go-redis retries, the Worker's own re-sends) with the
-- same KEYS and ARGV; it must not run a second time. go generate wraps
-- each mutating body into rp_body and ends the script with rp_run (see
-- Once in internal/luacompose), so the first run stores its reply under
-- the call's request key and a re-run returns that reply without running
-- the body.
-- KEYS[#KEYS] -> the call's reply name <prefix>:{q:<name>}:rp:<nonce>:<bucket>:<slot>;
--                removed from KEYS before the body runs. The reply is kept
--                in the HASH named by all before the last ':' (same hash
--                tag, so the same slot), field <slot>: one small hash per
--                64 calls of a Queue costs a few tens of bytes a reply,
--                where a key of its own cost about 150
--                (TestMemoryPerKeptReply).
-- ARGV[#ARGV] -> how long the reply is kept, ms (its hash's time in the
--                reply index is moved to Redis TIME + this at every reply
--                it keeps, rp_file); removed from ARGV likewise
-- Returns the body's reply, or the kept one.
-- Error replies (error tables, script errors) are never kept: a re-run
-- runs the body again.
--
-- rp_enc appends the exact encoding of a reply value to e: '*n:' then n
-- elements for an array (Redis stops at the first nil, so does this),
-- ':<int>;' for a number (Redis truncates it to an integer; '%d' does the
-- same and, unlike tostring's %.14g, stays exact up to 2^53), '$len:'
-- then the bytes for a string, ':1;' for true, '_' for false and nil.
-- The pieces become one string.format per 500 values (e.f the format,
-- e.a its arguments): a format call per value, or Lua's own number to
-- text, cost several times as much. '%s' copies a string whole unless it
-- is shorter than 100 bytes and holds a zero byte (Lua 5.1 formats those
-- with sprintf): such a string goes to e.out as it is.
local function rp_flush(e)
  if #e.f > 0 then
    e.out[#e.out + 1] = string.format(table.concat(e.f), unpack(e.a))
    e.f, e.a = {}, {}
  end
end
local function rp_enc(v, e)
  local t = type(v)
  local f, a = e.f, e.a
  if t == 'table' then
    local n = 0
    while v[n + 1] ~= nil do n = n + 1 end
    f[#f + 1] = '*%d:'
    a[#a + 1] = n
    for i = 1, n do
      local x = v[i]
      local tx = type(x)
      if tx == 'number' then
        f[#f + 1] = ':%d;'
        a[#a + 1] = x
      elseif tx == 'string' and (#x >= 100 or not string.find(x, '\0', 1, true)) then
        f[#f + 1] = '$%d:%s'
        a[#a + 1] = #x
        a[#a + 1] = x
      else
        rp_enc(x, e)
        f, a = e.f, e.a
      end
      if #a >= 500 then
        rp_flush(e)
        f, a = e.f, e.a
      end
    end
  elseif t == 'number' then
    f[#f + 1] = ':%d;'
    a[#a + 1] = v
  elseif t == 'string' then
    f[#f + 1] = '$%d:'
    a[#a + 1] = #v
    rp_flush(e)
    e.out[#e.out + 1] = v
  elseif v == true then
    f[#f + 1] = ':1;'
  else
    f[#f + 1] = '_'
  end
end
-- rp_dec reads the value rp_enc wrote at position p of s and returns it
-- with the position after it (false for nil, which Redis replies as nil).
local function rp_dec(s, p)
  local c = string.byte(s, p)
  if c == 42 then -- '*'
    local e = string.find(s, ':', p, true)
    local n, r = tonumber(string.sub(s, p + 1, e - 1)), {}
    p = e + 1
    for i = 1, n do r[i], p = rp_dec(s, p) end
    return r, p
  elseif c == 58 then -- ':'
    local e = string.find(s, ';', p, true)
    return tonumber(string.sub(s, p + 1, e - 1)), e + 1
  elseif c == 36 then -- '$'
    local e = string.find(s, ':', p, true)
    local n = tonumber(string.sub(s, p + 1, e - 1))
    return string.sub(s, e + 1, e + n), e + n + 1
  end
  return false, p + 1
end
-- rp_concat is table.concat(out) in runs of 1000: miniredis's Lua puts
-- every element of one concat on its registry (about 5k slots).
local function rp_concat(out)
  local n = #out
  if n <= 1000 then return table.concat(out) end
  local runs = {}
  for i = 1, n, 1000 do runs[#runs + 1] = table.concat(out, '', i, math.min(i + 999, n)) end
  return table.concat(runs)
end
-- rp_file files a reply hash in the queue's reply index, the ZSET
-- <prefix>:{q:<name>}:rp:idx (hash -> Redis TIME ms + ttl of its latest
-- reply), and when the hash is new there, deletes up to RP_SWEEP hashes
-- whose time has passed. The hashes carry no TTL, so no volatile-*
-- eviction policy can take a reply before its call's last re-send; a
-- call files at most one new hash, so sweeping two at each new one
-- keeps up with any number of Queues, short-lived ones included.
local function rp_file(key, ttl)
  local RP_SWEEP = 2
  local t = redis.call('TIME')
  local now = t[1] * 1000 + math.floor(t[2] / 1000)
  local idx = string.sub(key, 1, string.find(key, '}', 1, true)) .. ':rp:idx'
  if redis.call('ZADD', idx, now + ttl, key) == 0 then return end
  local old = redis.call('ZRANGEBYSCORE', idx, '-inf', now, 'LIMIT', 0, RP_SWEEP)
  if #old > 0 then
    redis.call('DEL', unpack(old))
    redis.call('ZREM', idx, unpack(old))
  end
end
-- rp_run runs body once per reply key. keep (optional) returns what is
-- stored of the reply: a string kept as it is, or a table (or nil: the
-- reply itself) kept through rp_enc; grow turns the stored string back
-- into the reply.
local function rp_run(body, keep, grow)
  local key = table.remove(KEYS)
  local ttl = table.remove(ARGV)
  local cut = string.find(key, ':[^:}]*$') -- after the tag: the name has ':rp:'
  local field = string.sub(key, cut + 1)
  key = string.sub(key, 1, cut - 1)
  local kept = redis.call('HGET', key, field)
  if kept then
    if grow then return grow(kept) end
    return (rp_dec(kept, 1))
  end
  local r = body()
  if type(r) == 'table' and (r.err or r.ok) then return r end
  local s = keep and keep(r)
  if type(s) ~= 'string' then
    local e = {f = {}, a = {}, out = {}}
    rp_enc(s or r, e)
    rp_flush(e)
    s = rp_concat(e.out)
  end
  redis.call('HSET', key, field, s)
  rp_file(key, ttl)
  return r
end
-- take_kept.lua: what take keeps of its reply (reply.lua) and how a
-- re-sent take grows it back. Payloads can be large, so the kept reply
-- holds no records: only the head fields, the fence, the gate and each
-- task's ID and due score, as one "c,now,head,next,parked,fence,gate,id,score,..." string
-- (one format and one concat, where the generic encoding of two values
-- per task costs several times as much). A re-sent take reads the records
-- again and returns the tasks still leased under that fence (a task whose
-- lease expired and went to another delivery meanwhile is left out: this
-- delivery of it has ended).
-- KEYS[4] -> tasks base   KEYS[7] -> lease HASH (take's own KEYS)
-- Returns (take_grow) take's reply as take.lua documents it.
local function take_keep(r)
  if #r < 7 then return nil end -- not take's shape: kept the generic way
  local ids = r[0] -- take.lua's items when it took every one of them
  if not ids then
    local o = 0
    ids = {}
    for i = 8, #r, 3 do
      ids[o + 1] = r[i]
      ids[o + 2] = r[i + 1]
      o = o + 2
    end
  end
  -- r[1], r[2] are numbers, r[3], r[4] score text or '', r[5] the parked
  -- count or {parked, lost}, kept as "p/l", r[6] the fence text (0, a
  -- number, when nothing was due), r[7] the gate ('' or Unix ms text); IDs
  -- are base 36 and scores digits, so a comma never occurs in any of them
  local np = r[5]
  if type(np) == 'table' then np = string.format('%d/%d', np[1], np[2]) end
  local ok, head = pcall(string.format, '%d,%d,%s,%s,%s,%s,%s,', r[1], r[2], r[3], r[4], np, r[6], r[7])
  if not ok then return nil end -- not take's shape: kept the generic way
  return head .. table.concat(ids, ',')
end
local function take_grow(s)
  local c, now, hd, nx, np, fence, gate, rest = string.match(s, '^(%-?%d+),(%d+),(%d*),(%d*),([%d/]+),(%d+),(%d*),(.*)$')
  if not c then return (rp_dec(s, 1)) end
  if fence == '0' then fence = 0 end
  local parked, lost = string.match(np, '^(%d+)/(%d+)$')
  if parked then np = {tonumber(parked), tonumber(lost)} else np = tonumber(np) end
  local out = {tonumber(c), tonumber(now), hd, nx, np, fence, gate}
  local ids, scores = {}, {}
  for id, sc in string.gmatch(rest, '([^,]+),([^,]+)') do
    ids[#ids + 1] = id
    scores[#scores + 1] = sc
  end
  if #ids == 0 then return out end
  local fences = redis.call('HMGET', KEYS[7], unpack(ids))
  local blobs = get_recs(KEYS[4], ids)
  for i = 1, #ids do
    if fences[i] == fence and blobs[i] then
      out[#out + 1] = ids[i]
      out[#out + 1] = scores[i]
      out[#out + 1] = blobs[i]
    end
  end
  return out
end
local function rp_body()
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

end
return rp_run(rp_body, take_keep, take_grow)
