-- Code generated from lib.lua + reply.lua + take_kept.lua + enqueue.lua + enqueue_tick.lua by `go generate ./delay`; DO NOT EDIT.
-- enqueue_tick.lua: one tick of a periodic job (package periodic): the
-- one-job enqueue of enqueue.lua, run here as enqueue_body, behind the
-- job's guard, in one script. The guard is the last tick the job handled
-- (enqueued, or skipped by the caller's catch-up policy, or passed while
-- paused); a tick at or before it is refused, so a tick makes at most one
-- task ever, however long after its task ended a lagging process asks
-- again (enqueue.lua's own (key, token) check lasts only as long as the
-- task, or its DoneTTL tombstone).
-- KEYS[1..8] -> as enqueue.lua   KEYS[9] -> the job's state HASH
-- ARGV[1..9] -> as enqueue.lua (business key = the job's name, token =
--               the tick's Unix ms, when = the tick)
-- ARGV[10] -> the tick, Unix ms  ARGV[11] -> the caller's process ID
-- ARGV[12] -> the caller's definition (a digest of its schedule)
-- ARGV[13] -> '1': skip the tick (move the guard, make no task)
-- ARGV[14] -> the tick after this one by the caller's schedule, Unix ms
-- The state hash: last (the guard, Unix ms), enq (the last tick that made
-- a task), next (ARGV[14] of the last tick handled), paused (since, Unix
-- ms), p:<process> = '<expiry Unix ms> <definition>[ <more>]' (a
-- declaration, written from Go; what follows the definition is for
-- operators, not read here), d:<definition> = '<first declared Unix ms>
-- <spec>'.
-- Only a caller whose own declaration is live may move the guard, and
-- only when its definition is the job's winner: of the definitions with
-- a live declaration, the one declared first (ties: the smaller digest).
-- Expired declarations, and definitions no live declaration holds, are
-- deleted here.
-- Returns {outcome, last, now, winner, prev, enqueue reply}: outcome T_RAN (the
-- enqueue ran: its reply, as enqueue.lua's, says what it did; the guard
-- moved only when it made or found the task), T_SKIPPED, T_PAUSED (the
-- guard moved, no task), T_STALE (tick <= last), T_EARLY (tick > Redis
-- TIME), T_UNDECLARED (the caller's declaration is missing, expired or of
-- another definition), T_OTHER (another definition is the winner); last
-- is the guard after the call (0: none), prev the guard before it (so the
-- caller that moved the guard alone can count the ticks it passed over),
-- winner '' when no declaration is live.

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

-- header is the one check of a record's header: bounded fields, lengths
-- within the record. It returns flags and digest (text), attempt and the
-- three lengths as numbers, and the position of the key; nil when
-- unreadable.
local function header(blob)
  if type(blob) ~= 'string' then return nil end
  local fl, dg, a, kl, tl, el, p = string.match(blob, HEADER)
  if not fl then return nil end
  if #a > 9 or #kl > 7 or #tl > 7 or #el > 7 then return nil end
  kl, tl, el = tonumber(kl), tonumber(tl), tonumber(el)
  if p - 1 + kl + tl + el > #blob then return nil end
  return fl, dg, tonumber(a), kl, tl, el, p
end

-- parse reads the header and the key, token and error. The payload is not
-- copied: payload_of or build take it from the original blob when needed.
local function parse(blob)
  local fl, dg, a, kl, tl, el, p = header(blob)
  if not fl then return nil end
  return {
    attempt = a, flags = tonumber(fl), dg = dg,
    key = string.sub(blob, p, p + kl - 1),
    token = string.sub(blob, p + kl, p + kl + tl - 1),
    err = string.sub(blob, p + kl + tl, p + kl + tl + el - 1),
    blob = blob, poff = p + kl + tl + el,
  }
end

local function payload_of(t)
  if t.payload == nil then t.payload = string.sub(t.blob, t.poff) end
  return t.payload
end

local function build(t)
  return fmt(t.flags) .. t.dg .. fmt(t.attempt) .. ',' ..
    fmt(#t.key) .. ',' .. fmt(#t.token) .. ',' .. fmt(#t.err) .. ';' ..
    t.key .. t.token .. t.err .. payload_of(t)
end

local function cancelled(t) return t.flags % 2 == 1 end
local function sole(t) return math.floor(t.flags / 2) % 2 == 1 end
-- is_done: a tombstone (Options.DoneTTL), the acked task's record kept
-- without its payload so that its (key, token) stays known.
local function is_done(flags) return math.floor(flags / 4) % 2 == 1 end

-- not_sole is a fresh record (flags F_SOLE, from freshRecord) without the
-- mark: its entry already holds, or now gets, another task.
local function not_sole(fresh) return '0' .. string.sub(fresh, 2) end

-- eff_token is a task's token as duplicates are found by: the caller's,
-- or the task ID when the library made it (tok '').
local function eff_token(tok, id)
  if tok == '' then return id end
  return tok
end

-- tkey is the tasks bucket of a task ID.
local function tkey(tasks, id) return tasks .. ':' .. string.sub(id, 1, -2) end

local function put_rec(tasks, id, blob) redis.call('HSET', tkey(tasks, id), id, blob) end

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

-- entry_ids splits an index entry (nil: none) into its IDs.
local function entry_ids(v)
  local out = {}
  if v then for id in string.gmatch(v, '[^,]+') do out[#out + 1] = id end end
  return out
end

-- entry reads the index entry of digest dg and the records of its IDs.
-- It returns ids, the live IDs in entry order (an ID whose record is gone
-- is stale and left out, so a rewrite drops it); mine, those whose record
-- holds key; and recs, ID -> parsed record (false when unreadable: kept
-- in the entry, counted for no key). pre is the entry when the caller
-- read it already (false: none).
local function entry(tasks, idx, dg, key, pre)
  if pre == nil then pre = redis.call('HGET', idx, dg) end
  local all = entry_ids(pre)
  local ids, mine, recs = {}, {}, {}
  if #all == 0 then return ids, mine, recs end
  local blobs = get_recs(tasks, all)
  for k, id in ipairs(all) do
    local blob = blobs[k]
    if blob then
      ids[#ids + 1] = id
      local t = parse(blob)
      recs[id] = t or false
      if t and t.key == key then mine[#mine + 1] = id end
    end
  end
  return ids, mine, recs
end

local function idx_set(idx, dg, ids)
  if #ids == 0 then redis.call('HDEL', idx, dg)
  else redis.call('HSET', idx, dg, table.concat(ids, ',')) end
end

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

-- queue_live tells whether the queue holds tasks (any of its sets
-- given exists): a missing counter or index then means it was lost, not that
-- the queue is new. Called only on those rare paths.
local function queue_live(...)
  return redis.call('EXISTS', ...) > 0
end

-- ctr_last is the field-value pairs that write an assigner's ms, seq and
-- req back to the ctr hash (read as HMGET ctr ms seq req).
local function ctr_last(st) return 'ms', fmt(st.ms), 'seq', fmt(st.seq), 'req', fmt(st.req) end

-- assign_score is one assigner step with the ctr hash read and written
-- around it (retry, sweep, requeue, reschedule).
local function assign_score(due, ctr, stats, ms, epoch, mult, maxrel)
  local last = redis.call('HMGET', ctr, 'ms', 'seq', 'req')
  local st = assigner(due, epoch, mult, maxrel, tonumber(last[1]), tonumber(last[2]), tonumber(last[3]))
  local score, code = st.assign(ms)
  if score then
    redis.call('HSET', ctr, ctr_last(st))
    if st.overflow > 0 then redis.call('HINCRBY', stats, 'overflow', st.overflow) end
  end
  return score, code
end

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

-- add_due inserts into the due set and pushes the wake list when the task
-- is the new head. ZRANK after the ZADD tells that without reading the old
-- head's score (a WITHSCORES reply is formatted with %.17g and parsed back).
local function add_due(due, wake, id, score)
  redis.call('ZADD', due, fmt(score), id)
  if redis.call('ZRANK', due, id) == 0 then push_wake(wake) end
end

local function base36(n)
  local digits, s = '0123456789abcdefghijklmnopqrstuvwxyz', ''
  repeat
    local d = n % 36
    s = string.sub(digits, d + 1, d + 1) .. s
    n = (n - d) / 36
  until n == 0
  return s
end

local function state_of(due, inflight, dead, id, t)
  if t and is_done(t.flags) then return 'done', '' end
  local s = redis.call('ZSCORE', due, id)
  if s then return 'pending', s end
  s = redis.call('ZSCORE', inflight, id)
  if s then
    if t and cancelled(t) then return 'cancelled', s end
    return 'inflight', s
  end
  s = redis.call('ZSCORE', dead, id)
  if s then return 'dead', s end
  return 'unknown', ''
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
local function enqueue_body()
local due, inflight, dead, tasks, idx, ctr, stats, wake =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local key, dg, token, rec = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local epoch, mult, maxrel, maxper = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local now = now_ms()

local iv = redis.call('HMGET', idx, dg, IDX_MARK)
-- no index mark: a new queue, or an index lost while the queue holds
-- tasks, where a duplicate would pass
local mark = not iv[2]
if mark and redis.call('EXISTS', idx) == 0 and queue_live(due, inflight, dead) then
  return {C_IDX_LOST}
end
local ids, mine, recs = entry(tasks, idx, dg, key, iv[1])
local w = tonumber(ARGV[5])
local ms = epoch + w
if w < 0 then ms = now - w - 1 end
if token ~= '' then
  for _, id in ipairs(mine) do
    local t = recs[id]
    if eff_token(t.token, id) == token then
      local st, sc = state_of(due, inflight, dead, id, t)
      if st ~= 'unknown' or cancelled(t) then return {C_DUP, id, st, sc, now} end
      -- in no set (its due entry was lost): due again at when, not a
      -- duplicate in state unknown
      local score, code = assign_score(due, ctr, stats, ms, epoch, mult, maxrel)
      if not score then return {code} end
      add_due(due, wake, id, score)
      redis.call('HINCRBY', stats, 'restored', 1)
      return {C_RESTORED, id, 'pending', score, now}
    end
  end
end
-- the entry cap bounds every script that reads it, even when many keys
-- share the digest
if #mine >= maxper or #ids >= 4 * maxper then return {C_TOO_MANY} end

-- assign_score by hand, so that the ms/seq and the id counter are read in
-- one HMGET and written in one HSET (one call fewer than assign_score plus
-- HINCRBY).
local last = redis.call('HMGET', ctr, 'ms', 'seq', 'req', 'id', 'hw', 'hww')
if not last[4] then
  if queue_live(due, inflight, dead, idx, stats) then return {C_CTR_LOST} end
elseif not string.match(last[4], '^%d+$') then redis.call('HINCRBY', ctr, 'id', 0) end -- raises HINCRBY's error
local st = assigner(due, epoch, mult, maxrel, tonumber(last[1]), tonumber(last[2]), tonumber(last[3]))
local score, code = st.assign(ms)
if not score then return {code} end

local n = (tonumber(last[4]) or 0) + 1
local id = base36(n)
-- F_SOLE marks the only task of its entry; a second task clears the mark.
if #ids > 0 then rec = not_sole(rec) end
if redis.call('HSETNX', tkey(tasks, id), id, rec) == 0 then return {C_CTR_LOST} end
if #ids == 1 then
  local t = recs[ids[1]]
  if t and sole(t) then
    t.flags = t.flags - F_SOLE
    put_rec(tasks, ids[1], build(t))
  end
end
ids[#ids + 1] = id
idx_set(idx, dg, ids)
if mark then redis.call('HSET', idx, IDX_MARK, '1') end
add_due(due, wake, id, score)
redis.call('HSET', ctr, 'id', fmt(n), ctr_last(st))
hw_note(ctr, now, st.hw, last[5], last[6])
if st.overflow > 0 then redis.call('HINCRBY', stats, 'overflow', st.overflow) end
return {C_OK, id, score, now}
end
local T_RAN, T_SKIPPED, T_PAUSED, T_STALE, T_EARLY, T_UNDECLARED, T_OTHER = 0, 1, 2, 3, 4, 5, 6
local st = KEYS[9]
local tick, proc, def, skip, nxt = tonumber(ARGV[10]), ARGV[11], ARGV[12], ARGV[13] == '1', ARGV[14]
local now = now_ms()

local all = redis.call('HGETALL', st)
local last, paused, mine = 0, false, false
local live, first, gone = {}, {}, {}
for i = 1, #all, 2 do
  local f, v = all[i], all[i + 1]
  local p = string.match(f, '^p:(.*)$')
  if p then
    local exp, d = string.match(v, '^(%d+) (%S+)')
    if exp and tonumber(exp) > now then
      live[d] = true
      if p == proc and d == def then mine = true end
    else
      gone[#gone + 1] = f
    end
  elseif string.sub(f, 1, 2) == 'd:' then
    first[string.sub(f, 3)] = tonumber(string.match(v, '^(%d+)')) or 0
  elseif f == 'last' then
    last = tonumber(v) or 0
  elseif f == 'paused' then
    paused = true
  end
end
local winner, wfirst = '', nil
for d, at in pairs(first) do
  if not live[d] then
    gone[#gone + 1] = 'd:' .. d
  elseif wfirst == nil or at < wfirst or (at == wfirst and d < winner) then
    winner, wfirst = d, at
  end
end
if #gone > 0 then redis.call('HDEL', st, unpack(gone)) end

local prev = last
if not mine then return {T_UNDECLARED, last, now, winner, prev} end
if winner ~= def then return {T_OTHER, last, now, winner, prev} end
if tick <= last then return {T_STALE, last, now, winner, prev} end
if tick > now then return {T_EARLY, last, now, winner, prev} end
if paused or skip then
  redis.call('HSET', st, 'last', fmt(tick), 'next', nxt)
  if paused then return {T_PAUSED, tick, now, winner, prev} end
  return {T_SKIPPED, tick, now, winner, prev}
end
local r = enqueue_body()
if r[1] == C_OK or r[1] == C_DUP or r[1] == C_RESTORED then
  redis.call('HSET', st, 'last', fmt(tick), 'enq', fmt(tick), 'next', nxt)
  last = tick
end
return {T_RAN, last, now, winner, prev, r}

end
return rp_run(rp_body)
