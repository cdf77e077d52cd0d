-- enqueue_batch.lua: idempotent enqueue of 1..maxEnqueueJobs tasks, with
-- exactly the outcome of enqueueing them one by one in ARGV order (same
-- IDs, scores, duplicates, codes, stored state), with few Redis calls: one
-- HMGET reads the index entries of every job's digest; a digest with no
-- entry (the common case) proves its job has no duplicate, and its task
-- costs no call of its own. Records go out in one HSET per tasks bucket,
-- index entries in one HSET, scores in one ZADD, then one wake check.
-- Digests that already have an entry take the slow path: their records are
-- read. Records come built from Go (freshRecord), so the fast path builds
-- no strings but the score text.
-- KEYS[1] -> due ZSET        KEYS[2] -> inflight ZSET   KEYS[3] -> dead ZSET
-- KEYS[4] -> tasks base      KEYS[5] -> idx HASH        KEYS[6] -> ctr HASH
-- KEYS[7] -> stats HASH      KEYS[8] -> wake LIST
-- ARGV[1] -> codec epoch ms  ARGV[2] -> 2^bits   ARGV[3] -> codec max ms offset
-- ARGV[4] -> max tasks per business key
-- ARGV[3i+2 .. 3i+4] -> job i (i = 1..n): digest of its business key,
--   fresh record (it holds the key and the token; toklen 0: generate, the
--   token is the ID), when: ms after the codec epoch (>= 0) or
--   -(delay ms + 1) for a delay from Redis TIME
-- Returns {now, id0, r1, ..., rn}. The tasks created get the IDs
-- base36(id0 + 1), base36(id0 + 2), ... in job order, and ri is the score
-- of job i's task when it made one (integer replies, exact below 2^53);
-- otherwise ri is {C_DUP, id, state, score} (the score as ZSCORE gives it)
-- or {code}, or {C_RESTORED, id, 'pending', score} for a task whose
-- record was in no set (its due entry lost): it is due again at its when.
-- The ctr hash's high-water mark follows the batch's seqs (hw_note).
-- {-C_CTR_LOST} | {-C_IDX_LOST} (now is never negative): the counter or
-- the index is gone while the queue holds tasks, or a new ID already has
-- a record; nothing was written, Go repairs and sends again.
local due, inflight, dead, tasks, idx, ctr, stats, wake =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local epoch, mult, maxrel, maxper = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local n = math.floor((#ARGV - 4) / 3)
-- ARGV is a global: a local spares a table lookup at each per-job use
local argv = ARGV
local now = now_ms()

-- variadic calls in slices of at most 1000 arguments (unpack limits)
local function each_slice(list, step, fn)
  for i = 1, #list, step do fn(unpack(list, i, math.min(i + step - 1, #list))) end
end

local last = redis.call('HMGET', ctr, 'ms', 'seq', 'req', 'id', 'hw', 'hww')
local id0 = 0
if last[4] then
  if not string.match(last[4], '^%d+$') then redis.call('HINCRBY', ctr, 'id', 0) end -- raises the error HINCRBY would
  id0 = tonumber(last[4])
elseif n > 0 and queue_live(due, inflight, dead, idx, stats) then
  return {-C_CTR_LOST}
end
local out = {now, id0}
if n == 0 then return out end

-- Scores as assign_score gives them, with the ctr hash read above and
-- written once at the end.
local st = assigner(due, epoch, mult, maxrel, tonumber(last[1]), tonumber(last[2]), tonumber(last[3]))
local assign = st.assign

-- have[n + 1] is the index mark (see IDX_MARK)
local have, mark
do
  local dgs = {}
  for i = 1, n do dgs[i] = argv[3 * i + 2] end
  dgs[n + 1] = IDX_MARK
  if n < 1000 then
    have = redis.call('HMGET', idx, unpack(dgs))
  else
    have = {}
    for s = 1, n + 1, 1000 do
      local part = redis.call('HMGET', idx, unpack(dgs, s, math.min(s + 999, n + 1)))
      for k = 1, #part do have[s + k - 1] = part[k] end
    end
  end
  -- no mark: a new queue, or an index lost while the queue holds tasks,
  -- where duplicates would pass
  mark = not have[n + 1]
  if mark and redis.call('EXISTS', idx) == 0 and queue_live(due, inflight, dead) then
    return {-C_IDX_LOST}
  end
end

-- new_id is base36(k), with the prefix (all but the last digit) cached:
-- a batch's IDs are consecutive, so most share it, and so most share a
-- tasks bucket (cur, the list of its new records, grouped as they are made;
-- cur_n its length). k is one past the k of the call before (id0 +
-- created), so the last digit is counted on and the prefix worked out
-- only when it wraps: math.floor, a C call, cost more than the rest.
local created, restored = 0, 0
local zadds, z, minscore, minid = {}, 0, nil, nil
local recb, rorder = {}, {}
-- The last digits are cut from DIGITS as first needed: building all 36
-- up front cost about 6 µs a call, most of a small batch's setup.
local DIGITS, DIG = '0123456789abcdefghijklmnopqrstuvwxyz', {}
local gen_d, gen_prefix, cur, cur_n = 36, '', nil, 0
-- wrap starts the prefix of ID k, returns its last digit
local function wrap(k)
  local q = math.floor(k / 36)
  if q == 0 then gen_prefix = '' else gen_prefix = base36(q) end
  cur = group(recb, rorder, gen_prefix)
  cur_n = #cur
  return k - 36 * q
end
-- digit is the text of last digit d
local function digit(d)
  local c = string.sub(DIGITS, d + 1, d + 1)
  DIG[d] = c
  return c
end
local function new_id(k)
  local d = gen_d + 1
  if d >= 36 then d = wrap(k) end
  gen_d = d
  return gen_prefix .. (DIG[d] or digit(d))
end

-- add_rec queues the record of id, which new_id made last.
local function add_rec(id, rec)
  local k = cur_n + 2
  cur[k - 1] = id
  cur[k] = rec
  cur_n = k
  return cur, k
end

-- add_score queues id for the one ZADD, keeping the earliest score for
-- the wake check. The score goes as text: given a number, redis.call
-- formats it with %.17g, which costs more for numbers this size.
local function add_score(id, score)
  zadds[z + 1] = fmt(score)
  zadds[z + 2] = id
  z = z + 2
  if minscore == nil or score < minscore then minscore, minid = score, id end
end

-- key_token reads the key and token of a fresh record (nil: unreadable).
local function key_token(rec)
  local fl, _, _, kl, tl, _, p = header(rec)
  if not fl then return nil end
  return string.sub(rec, p, p + kl - 1), string.sub(rec, p + kl, p + kl + tl - 1)
end

-- Per digest: bydg[dg] is the job number i of a fast-path task, or the
-- state of the slow path: ids (the live IDs of the entry, in order, this
-- batch's included), and per ID its key, its effective token, its old
-- parsed record (t, false when unreadable), its new score and the list
-- position of its new record. A fast-path task puts its index entry (its
-- ID) in iw, the one index HSET, at once and keeps only where (fpos[i]:
-- iw[fpos[i]] is its ID; its score is out[i + 2]); expand finds the rest
-- when its digest comes back, and the state's entry is written over it.
local bydg = {}
local fpos, iw, m = {}, {}, 0
local slowdg = {}
local function new_state(dg)
  local s = {ids = {}, key = {}, eff = {}, t = {}, score = {}, pos = {}, dirty = false}
  bydg[dg] = s
  slowdg[#slowdg + 1] = dg
  return s
end

local function load(s, v)
  local all = entry_ids(v)
  local blobs = get_recs(tasks, all)
  for k, id in ipairs(all) do
    local blob = blobs[k]
    if blob then
      s.ids[#s.ids + 1] = id
      local t = parse(blob)
      s.t[id] = t or false
      if t then
        s.key[id] = t.key
        s.eff[id] = eff_token(t.token, id)
      end
    end
  end
end

-- expand turns the fast-path task of job i into slow-path state, when its
-- digest comes back in the batch.
local function expand(dg, i)
  local s = new_state(dg)
  local id = iw[fpos[i]]
  s.iwp = fpos[i]
  s.ids[1] = id
  local key, tok = key_token(argv[3 * i + 3])
  s.key[id] = key
  s.eff[id] = eff_token(tok, id)
  s.score[id] = out[i + 2]
  local l = recb[string.sub(id, 1, -2)]
  for k = 2, #l, 2 do
    if l[k - 1] == id then
      s.pos[id] = {l, k}
      break
    end
  end
  s.dirty = true -- its entry is written over the fast path's (iwp)
  return s
end

-- unsole clears F_SOLE of id, the one task of an entry that gets a second.
-- Old records are rewritten at the end, with everything else: a script
-- that stops on an error has written nothing.
local rewrites = {}
local function unsole(s, id)
  local pos = s.pos[id]
  if pos then
    local l, k = pos[1], pos[2]
    if string.byte(l[k], 1) == 50 then l[k] = not_sole(l[k]) end -- flags '2': still F_SOLE
  else
    local t = s.t[id]
    if t and sole(t) then
      t.flags = t.flags - F_SOLE
      rewrites[#rewrites + 1] = id
      rewrites[#rewrites + 1] = build(t)
    end
  end
end

local function slow(s, rec, ms)
  local key, token = key_token(rec)
  if not key then return nil end
  local nmine = 0
  for _, id in ipairs(s.ids) do
    if s.key[id] == key then
      if token ~= '' and s.eff[id] == token then
        local sc = s.score[id]
        if sc then return {C_DUP, id, 'pending', sc} end
        local t = s.t[id] or nil
        local state, zs = state_of(due, inflight, dead, id, t)
        if state ~= 'unknown' or not t or cancelled(t) then return {C_DUP, id, state, zs} end
        -- in no set (its due entry was lost): due again, as enqueue.lua does
        local score, code = assign(ms)
        if not score then return {code} end
        add_score(id, score)
        s.score[id] = score
        restored = restored + 1
        return {C_RESTORED, id, 'pending', score}
      end
      nmine = nmine + 1
    end
  end
  if nmine >= maxper or #s.ids >= 4 * maxper then return {C_TOO_MANY} end
  local score, code = assign(ms)
  if not score then return {code} end
  created = created + 1
  local id = new_id(id0 + created)
  local nids = #s.ids
  if nids == 1 then unsole(s, s.ids[1]) end
  if nids > 0 then rec = not_sole(rec) end -- not the entry's only task
  local l, k = add_rec(id, rec)
  s.pos[id] = {l, k}
  add_score(id, score)
  s.ids[nids + 1] = id
  s.key[id] = key
  s.eff[id] = eff_token(token, id)
  s.score[id] = score
  s.dirty = true
  return score
end

-- jobs of a batch mostly share their due text (the same After): it is
-- parsed once per run of equal texts (Lua compares interned strings by
-- pointer, and tonumber costs about half a µs)
local wtext, ms = nil, nil
for i = 1, n do
  local j = 3 * i
  local dg = argv[j + 2]
  if argv[j + 4] ~= wtext then
    wtext = argv[j + 4]
    local w = tonumber(wtext)
    ms = epoch + w
    if w < 0 then ms = now - w - 1 end
  end
  local s = bydg[dg]
  if s == nil and not have[i] then
    -- fast path: no entry means no task of this key, so no duplicate, and
    -- the task is its entry's only one (the record's F_SOLE holds)
    local score, code = assign(ms)
    if score then
      created = created + 1
      -- new_id, add_rec and add_score, inline: a Lua call a job costs
      -- about 1% of a batched enqueue each
      local d = gen_d + 1
      if d >= 36 then d = wrap(id0 + created) end
      gen_d = d
      local id = gen_prefix .. (DIG[d] or digit(d))
      cur_n = cur_n + 2
      cur[cur_n - 1] = id
      cur[cur_n] = argv[j + 3]
      m = m + 2
      iw[m - 1] = dg
      iw[m] = id
      fpos[i] = m
      z = z + 2
      zadds[z - 1] = fmt(score)
      zadds[z] = id
      if minscore == nil or score < minscore then minscore, minid = score, id end
      bydg[dg] = i
      out[i + 2] = score
    else
      new_state(dg)
      out[i + 2] = {code}
    end
  else
    if s == nil then
      s = new_state(dg)
      load(s, have[i])
    elseif type(s) == 'number' then
      s = expand(dg, s)
    end
    local r = slow(s, argv[j + 3], ms)
    if not r then return redis.error_reply('delay: unreadable fresh record in job ' .. i) end
    out[i + 2] = r
  end
end
if created + restored == 0 then return out end

-- the guard against a counter gone back: no new ID may have a record.
-- Only the first bucket can hold older IDs; the others must not exist.
if #rorder > 0 then
  local l, f = recb[rorder[1]], {}
  for k = 1, #l / 2 do f[k] = l[2 * k - 1] end
  local got = redis.call('HMGET', tasks .. ':' .. rorder[1], unpack(f))
  for k = 1, #got do if got[k] then return {-C_CTR_LOST} end end
  if #rorder > 1 then
    local ks = {}
    for k = 2, #rorder do ks[k - 1] = tasks .. ':' .. rorder[k] end
    if redis.call('EXISTS', unpack(ks)) > 0 then return {-C_CTR_LOST} end
  end
end

-- Write: records, index entries, due set, counters; wake a sleeping worker
-- when the earliest new task is the new head (what one-by-one pushes
-- amount to).
for _, pre in ipairs(rorder) do redis.call('HSET', tasks .. ':' .. pre, unpack(recb[pre])) end
if #rewrites > 0 then put_recs(tasks, rewrites) end
for _, dg in ipairs(slowdg) do
  local s = bydg[dg]
  if s.iwp then
    iw[s.iwp] = table.concat(s.ids, ',') -- over its fast-path entry
  elseif s.dirty then
    iw[m + 1] = dg
    iw[m + 2] = table.concat(s.ids, ',')
    m = m + 2
  end
end
if mark then
  iw[m + 1] = IDX_MARK
  iw[m + 2] = '1'
end
each_slice(iw, 1000, function(...) redis.call('HSET', idx, ...) end)
each_slice(zadds, 1000, function(...) redis.call('ZADD', due, ...) end)
redis.call('HSET', ctr, 'id', fmt(id0 + created), ctr_last(st))
hw_note(ctr, now, st.hw, last[5], last[6])
if st.overflow > 0 then redis.call('HINCRBY', stats, 'overflow', st.overflow) end
if restored > 0 then redis.call('HINCRBY', stats, 'restored', restored) end
if redis.call('ZRANK', due, minid) == 0 then push_wake(wake) end
return out
