-- Code generated from lib.lua + reply.lua + take_kept.lua + reschedule_ids.lua by `go generate ./delay`; DO NOT EDIT.
-- reschedule_ids.lua: move pending tasks, by ID, to a new due time. An ID
-- acts only while it still names its task (IDs are never reused): one
-- whose record is gone, or that is no longer pending, is skipped, so a
-- task enqueued since with the same key and token is never touched.
-- All or nothing: every new score is found before the first write, so an
-- error leaves each task exactly as it was.
-- KEYS[1] -> tasks base   KEYS[2] -> due ZSET   KEYS[3] -> inflight ZSET
-- KEYS[4] -> dead ZSET   KEYS[5] -> ctr HASH   KEYS[6] -> stats HASH
-- KEYS[7] -> wake LIST
-- ARGV[1] -> 'at' | 'after'   ARGV[2] -> Unix ms | delay ms
-- ARGV[3] -> codec epoch ms   ARGV[4] -> 2^bits   ARGV[5] -> codec max ms offset
-- ARGV[6..] -> task IDs (at most 1000; a repeated ID counts once)
-- Returns {C_OK, pending moved, in flight (untouched), dead (untouched), new score|''}
--       | {C_BEFORE_EPOCH|C_RANGE|C_SEQ} (nothing moved)

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

-- tkey is the tasks bucket of a task ID.
local function tkey(tasks, id) return tasks .. ':' .. string.sub(id, 1, -2) end

local function get_rec(tasks, id) return redis.call('HGET', tkey(tasks, id), id) end
-- assigner picks the scores of a run of tasks. Each gets the next seq for
-- its ms: after the last seq handed out for that ms (st.ms, st.seq: the ctr
-- hash's values, then tracked here) and after every task already due in
-- that ms (read once per ms, then tracked). More than mult tasks in one ms
-- spill into the next ms; st.overflow counts them. st.req is the ms the
-- last task asked for: when the next asks for it too and the last one
-- spilled (st.ms > st.req), every ms from st.req to st.ms was full, so the
-- search starts at st.ms. That keeps a burst of any size due at one
-- instant at one step a task (without it, each task walked every full ms
-- again, one ZREVRANGEBYSCORE each, and failed past 64 of them). The
-- caller writes st.ms, st.seq, st.req and st.overflow back. st.hw is the
-- largest number of a ms's seqs in use that an assignment met: seq + 1,
-- or mult for a task that spilled (its ms was full); see hw_note.
-- st.assign(ms) returns the score, or nil and a code.
-- run_ms and run_base are the ms and base of the last assignment when it
-- did not spill: the next task asking for that ms (a batch's tasks mostly
-- share one) gets the next seq without the checks and look-ups a first
-- ask needs, which cost 1,000 instructions a task of a batched enqueue.
local function assigner(due, epoch, mult, maxrel, last_ms, last_seq, last_req)
  local st = {ms = last_ms, seq = last_seq, req = last_req, overflow = 0, hw = 0}
  local tops = {}
  local run_ms, run_base = nil, nil
  st.assign = function(ms)
    if ms == run_ms and st.ms == ms and st.req == ms then
      local seq = st.seq + 1
      if seq < mult then
        st.seq = seq
        tops[ms] = seq
        if seq >= st.hw then st.hw = seq + 1 end
        return run_base + seq
      end
    end
    local req, spilled = ms, false
    if st.req == ms and st.ms and st.ms > ms then
      ms = st.ms
      spilled = true
    end
    for _ = 1, 64 do
      local rel = ms - epoch
      if rel < 0 then return nil, C_BEFORE_EPOCH end
      if rel > maxrel then return nil, C_RANGE end
      local base = rel * mult
      local seq = 0
      if st.ms == ms then seq = st.seq + 1 end
      local top = tops[ms]
      if top == nil then
        local r = redis.call('ZREVRANGEBYSCORE', due, fmt(base + mult - 1), fmt(base), 'WITHSCORES', 'LIMIT', '0', '1')
        top = false
        if r[2] then top = tonumber(r[2]) - base end
      end
      if top and top + 1 > seq then seq = top + 1 end
      if seq < mult then
        -- separate statements: on gopher-lua (miniredis) a multiple
        -- assignment of these fields once gave wrong seqs
        st.ms = ms
        st.seq = seq
        st.req = req
        tops[ms] = seq
        run_ms = nil
        if spilled then
          st.overflow = st.overflow + 1
          st.hw = mult
        else
          run_ms = ms
          run_base = base
          if seq >= st.hw then st.hw = seq + 1 end
        end
        return base + seq
      end
      tops[ms] = top
      spilled = true
      ms = ms + 1
    end
    return nil, C_SEQ
  end
  return st
end

-- ctr_last is the field-value pairs that write an assigner's ms, seq and
-- req back to the ctr hash (read as HMGET ctr ms seq req).
local function ctr_last(st) return 'ms', fmt(st.ms), 'seq', fmt(st.seq), 'req', fmt(st.req) end

-- hw_note records an assigner's st.hw in the ctr hash's high-water mark:
-- 'hw' is the largest number of one ms's seqs in use that an enqueue met
-- in the window 'hww' (Redis TIME / HIGH_WATER_WINDOW_MS), 'hwp' the
-- previous window's. cur and win are the hash's 'hw' and 'hww' as read
-- (HMGET). It writes only when the mark rises or the window turns.
local function hw_note(ctr, now, hw, cur_s, win_s)
  if hw == 0 then return end
  local w = math.floor(now / HIGH_WATER_WINDOW_MS)
  local win = tonumber(win_s)
  local cur = tonumber(cur_s) or 0
  if win ~= w then
    local prev = 0
    if win == w - 1 then prev = cur end
    redis.call('HSET', ctr, 'hw', fmt(hw), 'hww', fmt(w), 'hwp', fmt(prev))
  elseif hw > cur then
    redis.call('HSET', ctr, 'hw', fmt(hw))
  end
end

-- push_wake leaves one element on the wake list, so a worker blocked on it
-- re-arms its timer. Numbers go to redis.call as text: Redis 7.0 formats
-- a Lua number argument with %.17g, which costs more than the call.
local function push_wake(wake)
  redis.call('LPUSH', wake, '1')
  redis.call('LTRIM', wake, '0', '0')
  redis.call('PEXPIRE', wake, '60000')
end

-- mover moves pending tasks to ms (reschedule, reschedule_ids): put(id)
-- gives a due task its new score, counts one in flight or dead (left
-- alone) and returns an error code when the score space is exhausted;
-- finish writes every move in one ZADD, only after every score was found,
-- and returns the scripts' reply {C_OK, moved, in flight, dead, new score|''}.
local function mover(due, inflight, dead, ctr, stats, wake, epoch, mult, maxrel, ms)
  local m = {}
  local flying, deadn, last = 0, 0, ''
  local st, moves, head, headid = nil, {}, nil, nil
  function m.put(id)
    if redis.call('ZSCORE', due, id) then
      if not st then
        local l = redis.call('HMGET', ctr, 'ms', 'seq', 'req')
        st = assigner(due, epoch, mult, maxrel, tonumber(l[1]), tonumber(l[2]), tonumber(l[3]))
      end
      local score, c = st.assign(ms)
      if not score then return c end
      moves[#moves + 1] = fmt(score)
      moves[#moves + 1] = id
      if not head or score < head then head, headid = score, id end
      last = fmt(score)
    elseif redis.call('ZSCORE', inflight, id) then
      flying = flying + 1
    elseif redis.call('ZSCORE', dead, id) then
      deadn = deadn + 1
    end
  end
  function m.finish()
    if st then
      -- ZADD of a member already there only changes its score
      redis.call('ZADD', due, unpack(moves))
      redis.call('HSET', ctr, ctr_last(st))
      if st.overflow > 0 then redis.call('HINCRBY', stats, 'overflow', st.overflow) end
      if redis.call('ZRANK', due, headid) == 0 then push_wake(wake) end
    end
    return {C_OK, #moves / 2, flying, deadn, last}
  end
  return m
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
local function rp_body()
local tasks, due, inflight, dead, ctr, stats, wake = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local epoch, mult, maxrel = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local now = now_ms()
local ms = tonumber(ARGV[2])
if ARGV[1] == 'after' then ms = now + ms end
if ms - epoch < 0 then return {C_BEFORE_EPOCH} end
if ms - epoch > maxrel then return {C_RANGE} end
local mv = mover(due, inflight, dead, ctr, stats, wake, epoch, mult, maxrel, ms)
local seen = {}
for i = 6, #ARGV do
  local id = ARGV[i]
  if not seen[id] then
    seen[id] = true
    -- an ID whose record is gone (finished or removed) moves nothing
    if get_rec(tasks, id) then
      local c = mv.put(id)
      if c then return {c} end
    end
  end
end
return mv.finish()

end
return rp_run(rp_body)
