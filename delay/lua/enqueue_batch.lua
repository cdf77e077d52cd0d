-- enqueue_batch.lua: idempotent enqueue of 1..maxEnqueueJobs tasks, with exactly
-- the outcome of enqueueing them one by one in ARGV order (same IDs, scores,
-- duplicates, codes, stored state), with few Redis calls: a business key
-- that has no index entry yet (the common case) costs one HSETNX, which both
-- proves it holds no duplicate and writes its entry; records go out in one
-- HSET per tasks bucket, scores in one ZADD, then one wake check. Keys that
-- already have tasks take the slow path: their entry and records are read.
-- KEYS[1] -> due ZSET        KEYS[2] -> inflight ZSET   KEYS[3] -> dead ZSET
-- KEYS[4] -> tasks base      KEYS[5] -> idx base        KEYS[6] -> ctr HASH
-- KEYS[7] -> stats HASH      KEYS[8] -> wake LIST
-- ARGV[1] -> codec epoch ms  ARGV[2] -> 2^bits   ARGV[3] -> codec max ms offset
-- ARGV[4] -> max tasks per business key   ARGV[5] -> index bucket count
-- ARGV[6*i .. 6*i+5] -> job i (i = 1..n): business key, token ('' =
--   generate: the token is the ID), payload, 'at' | 'after', at: absolute
--   Unix ms / after: delay ms from Redis TIME, index bucket of the key
-- Returns {now, then per job i: code, id, state, score}, '' where a field has
-- no value: {C_OK, id, '', score} | {C_DUP, id, state, score} | {code, '', '', ''}
-- (now and new scores as integers; a duplicate's score as ZSCORE gives it)
local due, inflight, dead, tasks, idx, ctr, stats, wake =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local epoch, mult, maxrel, maxper = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local n = math.floor((#ARGV - 5) / 6)
local now = now_ms()

-- variadic calls in slices of at most 1000 arguments (unpack limits)
local function each_slice(list, step, fn)
  for i = 1, #list, step do fn(unpack(list, i, math.min(i + step - 1, #list))) end
end

local last = redis.call('HMGET', ctr, 'ms', 'seq', 'id', 'nib')
local id0 = 0
if last[3] then
  if not string.match(last[3], '^%d+$') then redis.call('HINCRBY', ctr, 'id', 0) end -- raises the error HINCRBY would
  id0 = tonumber(last[3])
end

-- Scores as assign_score gives them, with the ctr hash read above and
-- written once at the end.
local st = assigner(due, epoch, mult, maxrel, tonumber(last[1]), tonumber(last[2]))
local assign = st.assign

-- new_id is base36(k), with the prefix (all but the last digit) cached:
-- a batch's IDs are consecutive, so most share it.
local gen_q, gen_prefix = -1, ''
local function new_id(k)
  local q = math.floor(k / 36)
  if q ~= gen_q then
    gen_q = q
    if q == 0 then gen_prefix = '' else gen_prefix = base36(q) end
  end
  local d = k % 36
  if d < 10 then return gen_prefix .. string.char(48 + d) end
  return gen_prefix .. string.char(87 + d)
end

-- load reads what a key already holds: its live IDs (those whose record
-- is gone are stale and dropped), tokens and records (slow path).
local function load(key, s)
  local v = redis.call('HGET', ikey(idx, s.ib), key)
  local ids = {}
  if v then for id in string.gmatch(v, '[^,]+') do ids[#ids + 1] = id end end
  if #ids == 0 then return end
  local blobs = get_recs(tasks, ids)
  for k, id in ipairs(ids) do
    local blob = blobs[k]
    if blob then
      s.live[#s.live + 1] = id
      local t = parse(blob)
      if t then
        s.old[id] = t
        local eff = t.token
        if eff == '' then eff = id end
        if not s.tok[eff] then s.tok[eff] = {id = id, t = t} end
      end
    end
  end
end

-- Scores and now go back as integer replies (exact below 2^53).
local out, o = {now}, 1
local function put(code, id, st, sc)
  out[o + 1] = code; out[o + 2] = id; out[o + 3] = st; out[o + 4] = sc
  o = o + 4
end
local bykey, keylist = {}, {}
local zadds, minscore = {}, nil
local created, z = 0, 0
-- new records, grouped by tasks bucket as they are made: the IDs of a
-- batch are consecutive, so they fill one bucket after another
local recb, rorder = {}, {}
local function add_rec(id, rec)
  local l = group(recb, rorder, gen_prefix) -- gen_prefix is id's bucket: new_id(id) ran last
  local k = #l
  l[k + 1] = id
  l[k + 2] = rec
  return l, k + 2
end

-- add_score queues id for the one ZADD, keeping the earliest score for
-- the wake check.
local function add_score(id, score)
  zadds[z + 1] = fmt(score)
  zadds[z + 2] = id
  z = z + 2
  if minscore == nil or score < minscore then minscore = score end
end

-- header of a fresh record. Lengths are memoized as text: most keys of a
-- batch share a length, and number-to-text is the costly part here.
local lens = {}
local function len_text(n)
  local v = lens[n]
  if not v then
    v = fmt(n)
    lens[n] = v
  end
  return v
end
local function fresh_header(flags, s, key, token)
  return '0,0,' .. flags .. ',' .. s.ib .. ',' .. len_text(#key) .. ',' .. len_text(#token) .. ',0;'
end

-- expand turns the fast-path state of a key (one task made here) into the
-- tables the general path keeps, when the key comes back in the batch.
local function expand(s)
  s.live = {s.fid}
  s.tok = {[s.feff] = {id = s.fid, score = s.fscore}}
  s.old = {}
  s.pos = {[s.fid] = {s.flist, s.fidx}}
end

-- create makes (in memory) a fresh record: attempt, fence 0, flags, no
-- error. F_SOLE marks the only task of its key, so that its ack can drop
-- the index entry without reading it; a second task clears the mark.
local function create(key, s, id, token, payload, score)
  local nlive = #s.live
  if nlive == 1 then
    local first = s.live[1]
    local pos = s.pos[first]
    if pos then
      local l, k = pos[1], pos[2]
      l[k] = '0,0,0,' .. string.sub(l[k], 7) -- '0,0,2,' -> '0,0,0,'
    else
      local t = s.old[first]
      if t and sole(t) then
        t.flags = t.flags - F_SOLE
        put_rec(tasks, first, build(t))
      end
    end
  end
  local flags = '0'
  if nlive == 0 then flags = '2' end
  local l, k = add_rec(id, fresh_header(flags, s, key, token) .. key .. token .. payload)
  s.pos[id] = {l, k}
  add_score(id, score)
  s.live[nlive + 1] = id
  s.dirty = true
  local eff = token
  if eff == '' then eff = id end
  if not s.tok[eff] then s.tok[eff] = {id = id, score = score} end
end

if last[4] and last[4] ~= ARGV[5] then -- created with another bucket count
  for _ = 1, n do put(C_INDEX, '', '', '') end
  return out
end

for i = 1, n do
  local j = 6 * i
  local key, token = ARGV[j], ARGV[j + 1]
  local ms = tonumber(ARGV[j + 4])
  if ARGV[j + 3] == 'after' then ms = now + ms end
  local s = bykey[key]
  local done = false
  if not s then
    local ib = ARGV[j + 5]
    if not valid_ib(ib) then return redis.error_reply('delay: bad index bucket ' .. ib) end
    s = {ib = ib, dirty = false}
    bykey[key] = s
    keylist[#keylist + 1] = key
    -- fast path: no index entry means no task and so no duplicate
    local id = new_id(id0 + created + 1)
    if redis.call('HSETNX', ikey(idx, ib), key, id) == 1 then
      local score, code = assign(ms)
      if score then
        created = created + 1
        -- the only task of its key (F_SOLE); HSETNX wrote its index entry
        s.flist, s.fidx = add_rec(id, fresh_header('2', s, key, token) .. key .. token .. ARGV[j + 2])
        s.fid, s.fscore = id, score
        if token == '' then s.feff = id else s.feff = token end
        add_score(id, score)
        put(C_OK, id, '', score)
      else
        redis.call('HDEL', ikey(idx, ib), key)
        s.live, s.tok, s.old, s.pos = {}, {}, {}, {}
        put(code, '', '', '')
      end
      done = true
    else
      s.live, s.tok, s.old, s.pos = {}, {}, {}, {}
      load(key, s)
    end
  elseif not s.live then
    expand(s)
  end
  if not done then
    local hit = token ~= '' and s.tok[token]
    if hit then
      local st, sc
      if hit.score then st, sc = 'pending', hit.score
      else st, sc = state_of(due, inflight, dead, hit.id, hit.t) end
      put(C_DUP, hit.id, st, sc)
    elseif #s.live >= maxper then
      put(C_TOO_MANY, '', '', '')
    else
      local score, code = assign(ms)
      if not score then
        put(code, '', '', '')
      else
        created = created + 1
        local id = new_id(id0 + created)
        create(key, s, id, token, ARGV[j + 2], score)
        put(C_OK, id, '', score)
      end
    end
  end
end
if created == 0 then return out end

-- Write: records, index entries that changed, due set, counters; wake a
-- sleeping worker when the earliest new task is the new head (what
-- one-by-one pushes amount to).
local head = redis.call('ZRANGE', due, 0, 0, 'WITHSCORES')
for _, pre in ipairs(rorder) do redis.call('HSET', tasks .. ':' .. pre, unpack(recb[pre])) end
local ibw, iborder = {}, {}
for _, key in ipairs(keylist) do
  local s = bykey[key]
  if s.dirty then -- a key given a task here, beyond the fast path's entry
    local g = group(ibw, iborder, s.ib)
    g[#g + 1] = key
    g[#g + 1] = table.concat(s.live, ',')
  end
end
for _, ib in ipairs(iborder) do redis.call('HSET', ikey(idx, ib), unpack(ibw[ib])) end
each_slice(zadds, 1000, function(...) redis.call('ZADD', due, ...) end)
redis.call('HSET', ctr, 'ms', fmt(st.ms), 'seq', fmt(st.seq), 'id', fmt(id0 + created), 'nib', ARGV[5])
if st.overflow > 0 then redis.call('HINCRBY', stats, 'overflow', st.overflow) end
if (not head[2]) or minscore < tonumber(head[2]) then
  redis.call('LPUSH', wake, '1')
  redis.call('LTRIM', wake, 0, 0)
  redis.call('PEXPIRE', wake, 60000)
end
return out
