-- enqueue_batch.lua: idempotent enqueue of 1..maxEnqueueJobs tasks, with exactly
-- the outcome of enqueueing them one by one in ARGV order (same IDs, scores,
-- duplicates, codes), but with variadic reads and writes: one HMGET of the
-- index for all business keys, one ZADD, one HSET per hash, one wake check.
-- KEYS[1] -> due ZSET        KEYS[2] -> inflight ZSET   KEYS[3] -> dead ZSET
-- KEYS[4] -> tasks HASH      KEYS[5] -> idx HASH        KEYS[6] -> ctr HASH
-- KEYS[7] -> stats HASH      KEYS[8] -> wake LIST
-- ARGV[1] -> codec epoch ms  ARGV[2] -> 2^bits   ARGV[3] -> codec max ms offset
-- ARGV[4] -> max tasks per business key
-- ARGV[5*i .. 5*i+4] -> job i (i = 1..n): business key, token ('' = generate:
--   the token is the ID), payload, 'at' | 'after', at: absolute Unix ms /
--   after: delay ms from Redis TIME
-- Returns {now, then per job i: code, id, state, score}, '' where a field has
-- no value: {C_OK, id, '', score} | {C_DUP, id, state, score} | {code, '', '', ''}
-- (now and new scores as integers; a duplicate's score as ZSCORE gives it)
local due, inflight, dead, tasks, idx, ctr, stats, wake =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local epoch, mult, maxrel, maxper = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local n = math.floor((#ARGV - 4) / 5)
local now = now_ms()

-- variadic calls in slices of at most 1000 arguments (unpack limits)
local function each_slice(list, step, fn)
  for i = 1, #list, step do fn(unpack(list, i, math.min(i + step - 1, #list))) end
end

-- 1. Read the index of every business key of the batch, then the records
-- it points at, each once.
-- A key's tokens are only looked at when some job of the batch gives that
-- key an explicit token (s.tokens), as one-by-one enqueues would.
local bykey, keylist = {}, {}
for i = 1, n do
  local key = ARGV[5 * i]
  local s = bykey[key]
  if not s then
    s = {live = {}, tok = {}, tokens = false}
    bykey[key] = s
    keylist[#keylist + 1] = key
  end
  if ARGV[5 * i + 1] ~= '' then s.tokens = true end
end
local lists, idlist = {}, {}
each_slice(keylist, 1000, function(...)
  for _, v in ipairs(redis.call('HMGET', idx, ...)) do lists[#lists + 1] = v end
end)
for k, key in ipairs(keylist) do
  local ids = {}
  if lists[k] then for id in string.gmatch(lists[k], '[^,]+') do ids[#ids + 1] = id; idlist[#idlist + 1] = id end end
  bykey[key].ids = ids
end
local blobs = {}
each_slice(idlist, 1000, function(...)
  for _, v in ipairs(redis.call('HMGET', tasks, ...)) do blobs[#blobs + 1] = v end
end)
local b = 0
for _, key in ipairs(keylist) do
  local s = bykey[key]
  for _, id in ipairs(s.ids) do
    b = b + 1
    local blob = blobs[b]
    if blob then
      s.live[#s.live + 1] = id -- IDs whose record is gone are stale and dropped
      local t = s.tokens and parse(blob)
      if t then
        local eff = t.token
        if eff == '' then eff = id end
        if not s.tok[eff] then s.tok[eff] = {id = id, t = t} end
      end
    end
  end
end

-- 2. Decide every job in order, in memory. Scores follow assign_score:
-- after the last seq handed out for the ms (ctr) and after every task
-- already due in that ms (read once per ms, then tracked here).
local last = redis.call('HMGET', ctr, 'ms', 'seq', 'id')
local last_ms, last_seq = tonumber(last[1]), tonumber(last[2])
local id0 = 0
if last[3] then
  if not string.match(last[3], '^%d+$') then redis.call('HINCRBY', ctr, 'id', 0) end -- raises the error HINCRBY would
  id0 = tonumber(last[3])
end
local tops, overflow = {}, 0
local function assign(ms)
  local spilled = false
  for _ = 1, 64 do
    local rel = ms - epoch
    if rel < 0 then return nil, C_BEFORE_EPOCH end
    if rel > maxrel then return nil, C_RANGE end
    local base = rel * mult
    local seq = 0
    if last_ms == ms then seq = last_seq + 1 end
    local top = tops[ms]
    if top == nil then
      local r = redis.call('ZREVRANGEBYSCORE', due, fmt(base + mult - 1), fmt(base), 'WITHSCORES', 'LIMIT', 0, 1)
      top = false
      if r[2] then top = tonumber(r[2]) - base end
    end
    if top and top + 1 > seq then seq = top + 1 end
    if seq < mult then
      -- separate statements: on gopher-lua (miniredis) the multiple
      -- assignment of these upvalues and the table field gave wrong seqs
      last_ms = ms
      last_seq = seq
      tops[ms] = seq
      if spilled then overflow = overflow + 1 end
      return base + seq
    end
    tops[ms] = top
    spilled = true
    ms = ms + 1
  end
  return nil, C_SEQ
end

-- Scores and now go back as integer replies (exact below 2^53).
local out, o = {now}, 1
local function put(code, id, st, sc)
  out[o + 1] = code; out[o + 2] = id; out[o + 3] = st; out[o + 4] = sc
  o = o + 4
end
local recs, zadds, touched, seen, minscore = {}, {}, {}, {}, nil
local created, r = 0, 0
for i = 1, n do
  local j = 5 * i
  local key, token = ARGV[j], ARGV[j + 1]
  local s = bykey[key]
  local hit = token ~= '' and s.tok[token]
  if hit then
    local st, sc
    if hit.score then st, sc = 'pending', hit.score
    else st, sc = state_of(due, inflight, dead, hit.id, hit.t) end
    put(C_DUP, hit.id, st, sc)
  elseif #s.live >= maxper then
    put(C_TOO_MANY, '', '', '')
  else
    local ms = tonumber(ARGV[j + 4])
    if ARGV[j + 3] == 'after' then ms = now + ms end
    local score, code = assign(ms)
    if not score then
      put(code, '', '', '')
    else
      created = created + 1
      local id = base36(id0 + created)
      -- a fresh record, as build() writes it: attempt, fence, flags 0, no error
      recs[r + 1] = id
      recs[r + 2] = '0,0,0,' .. #key .. ',' .. #token .. ',0;' .. key .. token .. ARGV[j + 2]
      zadds[r + 1] = fmt(score); zadds[r + 2] = id
      r = r + 2
      if minscore == nil or score < minscore then minscore = score end
      s.live[#s.live + 1] = id
      if not seen[key] then seen[key] = true; touched[#touched + 1] = key end
      if s.tokens then
        local eff = token
        if eff == '' then eff = id end
        if not s.tok[eff] then s.tok[eff] = {id = id, score = score} end
      end
      put(C_OK, id, '', score)
    end
  end
end
if created == 0 then return out end

-- 3. Write: records, index, due set, counters; wake a sleeping worker when
-- the earliest new task is the new head (what one-by-one pushes amount to).
local head = redis.call('ZRANGE', due, 0, 0, 'WITHSCORES')
each_slice(recs, 1000, function(...) redis.call('HSET', tasks, ...) end)
local idxset = {}
for _, key in ipairs(touched) do
  idxset[#idxset + 1] = key; idxset[#idxset + 1] = table.concat(bykey[key].live, ',')
end
each_slice(idxset, 1000, function(...) redis.call('HSET', idx, ...) end)
each_slice(zadds, 1000, function(...) redis.call('ZADD', due, ...) end)
redis.call('HSET', ctr, 'ms', fmt(last_ms), 'seq', fmt(last_seq), 'id', fmt(id0 + created))
if overflow > 0 then redis.call('HINCRBY', stats, 'overflow', overflow) end
if (not head[2]) or minscore < tonumber(head[2]) then
  redis.call('LPUSH', wake, '1')
  redis.call('LTRIM', wake, 0, 0)
  redis.call('PEXPIRE', wake, 60000)
end
return out
