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

-- err_list reads an err field: its texts, oldest first. A field that is
-- not a whole list is one bare text (an older record's).
local function err_list(f)
  if f == '' then return {} end
  if string.sub(f, 1, 1) ~= ERR_MARK then return {f} end
  local out, p = {}, 1
  while p <= #f do
    local n, q = string.match(f, '^' .. ERR_MARK .. '(%d+):()', p)
    if not n or #n > 5 or q + tonumber(n) - 1 > #f then return {f} end
    out[#out + 1] = string.sub(f, q, q + tonumber(n) - 1)
    p = q + tonumber(n)
  end
  return out
end

-- push_err returns the err field f with the text e added as the newest,
-- dropping the oldest beyond ERRS_KEPT texts or ERRS_BYTES bytes.
local function push_err(f, e)
  local l = err_list(f)
  l[#l + 1] = e
  local first, total = 1, 0
  for i = 1, #l do total = total + #l[i] end
  while #l - first + 1 > ERRS_KEPT or (total > ERRS_BYTES and first < #l) do
    total = total - #l[first]
    first = first + 1
  end
  if first == #l and string.sub(e, 1, 1) ~= ERR_MARK then return e end
  local parts = {}
  for i = first, #l do parts[#parts + 1] = ERR_MARK .. fmt(#l[i]) .. ':' .. l[i] end
  return table.concat(parts)
end

-- flags_of reads the flags digit of a record (nil: not a digit), and
-- dg_of its digest, from their fixed places.
local function flags_of(blob)
  local b = string.byte(blob, 1)
  if b and b >= 48 and b <= 57 then return b - 48 end
  return nil
end
local function dg_of(blob) return string.sub(blob, 2, 1 + DIGEST_LEN) end

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

local function get_rec(tasks, id) return redis.call('HGET', tkey(tasks, id), id) end
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

-- put_recs writes {id1, blob1, id2, blob2, ...} with one HSET per bucket.
local function put_recs(tasks, pairs_)
  local ids = {}
  for i = 1, #pairs_ / 2 do ids[i] = pairs_[2 * i - 1] end
  local groups, order = buckets(tasks, ids)
  for _, k in ipairs(order) do
    local g, args = groups[k], {}
    for j = 1, g.n do
      args[2 * j - 1] = pairs_[2 * g[j] - 1]
      args[2 * j] = pairs_[2 * g[j]]
    end
    redis.call('HSET', k, unpack(args))
  end
end

-- del_recs deletes the records of ids with one HDEL per bucket.
local function del_recs(tasks, ids)
  local groups, order = buckets(tasks, ids, true)
  for _, k in ipairs(order) do
    local g = groups[k]
    redis.call('HDEL', k, unpack(g, 1, g.n))
  end
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

-- idx_unlist removes ids[k] from the index entry of digest dgs[k], k = 1
-- to #dgs (the IDs distinct; a digest repeats when tasks share a key):
-- one read and at most two writes in all. An entry that is exactly its ID
-- (the common case) is dropped whole with no table keyed per task (one
-- cost 3% of an ack); only entries of several IDs are grouped by digest.
-- An entry already gone is left so.
local function idx_unlist(idx, dgs, ids)
  local lists = redis.call('HMGET', idx, unpack(dgs))
  local empty, ne, drops, order, vals = {}, 0, nil, nil, nil
  for k = 1, #dgs do
    local v = lists[k]
    if v == ids[k] then
      ne = ne + 1
      empty[ne] = dgs[k]
    elseif v and string.find(v, ',', 1, true) then
      if not drops then drops, order, vals = {}, {}, {} end
      local dg = dgs[k]
      group(drops, order, dg)[ids[k]] = true
      vals[dg] = v
    end
  end
  local kept = {}
  if drops then
    for _, dg in ipairs(order) do
      local drop, left = drops[dg], {}
      for _, x in ipairs(entry_ids(vals[dg])) do
        if not drop[x] then left[#left + 1] = x end
      end
      if #left == 0 then
        ne = ne + 1
        empty[ne] = dg
      else
        kept[#kept + 1] = dg
        kept[#kept + 1] = table.concat(left, ',')
      end
    end
  end
  if ne > 0 then redis.call('HDEL', idx, unpack(empty)) end
  if #kept > 0 then redis.call('HSET', idx, unpack(kept)) end
end

-- delete_task deletes a record and its ID in the index (the whole entry,
-- unread, when the task is its sole ID).
local function delete_task(tasks, idx, id, t)
  redis.call('HDEL', tkey(tasks, id), id)
  if not t then return end
  if sole(t) then
    redis.call('HDEL', idx, t.dg)
  else
    idx_unlist(idx, {t.dg}, {id})
  end
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

-- end_lease drops a task from in flight (ZSET and lease hash).
local function end_lease(inflight, lease, id)
  redis.call('ZREM', inflight, id)
  redis.call('HDEL', lease, id)
end

-- to_dead moves a leased task to the dead set, its last delivery
-- counted and its error added to the last ones kept.
local function to_dead(inflight, lease, dead, tasks, stats, id, t, err, now)
  end_lease(inflight, lease, id)
  redis.call('ZADD', dead, fmt(now), id)
  t.attempt = t.attempt + 1
  t.err = push_err(t.err, err)
  put_rec(tasks, id, build(t))
  redis.call('HINCRBY', stats, 'dead', 1)
end

-- owned returns the record when (id, fence) holds the current lease:
-- nil and C_NOT_FOUND (no record), C_LEASE_LOST (not in flight, or under
-- another fence) or C_CORRUPT (unreadable, the lease held).
local function owned(tasks, lease, id, fence)
  local blob = get_rec(tasks, id)
  if not blob then return nil, C_NOT_FOUND end
  local f = flags_of(blob)
  if f and is_done(f) then return nil, C_NOT_FOUND end -- acked: a tombstone
  if redis.call('HGET', lease, id) ~= fence then return nil, C_LEASE_LOST end
  local t = parse(blob)
  if not t then return nil, C_CORRUPT end
  return t
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
