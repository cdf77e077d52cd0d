-- lib.lua: helpers shared by every delay script. Go prepends this file to
-- each script body, so it declares no KEYS/ARGV of its own.
--
-- Bucketed hashes. The tasks and idx keys a script gets in KEYS are base
-- names: a record lives in the hash <tasks>:<task ID minus its last base-36
-- digit> (36 consecutive IDs per bucket), an index entry in <idx>:<ib>,
-- ib = FNV-1a 32 of the business key mod the queue's bucket count (computed
-- in Go, stored in the record; ctr field 'nib' holds the count, and a call
-- that brings another count gets C_INDEX). Small hashes stay listpack-encoded, which is what keeps a pending
-- task near 200 B; the derived names keep the base key's hash tag, so every
-- key a script touches is still on the slot of its KEYS.
--
-- Task record (one field of a tasks bucket, field = task ID):
--   "<attempt>,<fence>,<flags>,<ib>,<keylen>,<toklen>,<errlen>;<key><token><err><payload>"
-- flags: bit 1 (F_CANCELLED) = cancelled while in flight; bit 2 (F_SOLE) = the
-- only task of its key, so its index entry is exactly its ID (ack drops the
-- entry without reading it). toklen 0 means the token is the ID.
-- Scores: (ms - epoch) * mult + seq, mult = 2^bits, exactly score.TimeCodec.
-- Return codes (mirrored in scripts.go):
local C_OK, C_DUP, C_NOT_FOUND, C_LEASE_LOST = 0, 1, 2, 3
local C_BEFORE_EPOCH, C_RANGE, C_TOO_MANY, C_SEQ = 4, 5, 6, 7
local C_CORRUPT, C_CANCELLED, C_DEAD, C_INDEX = 8, 9, 10, 11
local F_CANCELLED, F_SOLE = 1, 2
local HEADER = '^(%d+),(%d+),()(%d+),(%d+),(%d+),(%d+),(%d+);()'

local function fmt(n) return string.format('%d', n) end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- header is the one check of a record's header: bounded fields, lengths
-- within the record. It returns the fields as text (attempt, fence, flags,
-- ib), the position after the fence, the three lengths as numbers and the
-- position of the key; nil when unreadable. It builds no table, so the hot
-- paths (take, ack) use it directly.
local function header(blob)
  if type(blob) ~= 'string' then return nil end
  local a, f, p3, fl, ib, kl, tl, el, p = string.match(blob, HEADER)
  if not a then return nil end
  if #a > 9 or #f > 15 or #fl > 3 or #ib > 5 or #kl > 7 or #tl > 7 or #el > 7 then return nil end
  kl, tl, el = tonumber(kl), tonumber(tl), tonumber(el)
  if p - 1 + kl + tl + el > #blob then return nil end
  return a, f, p3, fl, ib, kl, tl, el, p
end

-- parse reads the header and the key, token and error. The payload is not
-- copied: payload_of or build take it from the original blob when needed.
local function parse(blob)
  local a, f, p3, fl, ib, kl, tl, el, p = header(blob)
  if not a then return nil end
  return {
    attempt = tonumber(a), fence = tonumber(f), flags = tonumber(fl), ib = ib,
    key = string.sub(blob, p, p + kl - 1),
    token = string.sub(blob, p + kl, p + kl + tl - 1),
    err = string.sub(blob, p + kl + tl, p + kl + tl + el - 1),
    blob = blob, p3 = p3, poff = p + kl + tl + el,
  }
end

local function payload_of(t)
  if t.payload == nil then t.payload = string.sub(t.blob, t.poff) end
  return t.payload
end

local function build(t)
  return fmt(t.attempt) .. ',' .. fmt(t.fence) .. ',' .. fmt(t.flags) .. ',' .. t.ib .. ',' ..
    fmt(#t.key) .. ',' .. fmt(#t.token) .. ',' .. fmt(#t.err) .. ';' ..
    t.key .. t.token .. t.err .. payload_of(t)
end

-- rehead rewrites only attempt and fence (the hot path of take): one copy
-- of the rest of the record instead of a full rebuild.
local function rehead(t)
  return fmt(t.attempt) .. ',' .. fmt(t.fence) .. ',' .. string.sub(t.blob, t.p3)
end

local function cancelled(t) return t.flags % 2 == 1 end
local function sole(t) return math.floor(t.flags / 2) % 2 == 1 end

-- tkey is the tasks bucket of a task ID.
local function tkey(tasks, id) return tasks .. ':' .. string.sub(id, 1, -2) end

-- ikey is the index bucket ib of the idx base key.
local function ikey(idx, ib) return idx .. ':' .. ib end

-- valid_ib reports whether an index bucket number from ARGV is well formed.
local function valid_ib(ib) return string.match(ib, '^%d%d?%d?%d?%d?$') ~= nil end

-- nib_differs reports whether the queue was created with another index
-- bucket count than nib (ARGV text).
local function nib_differs(ctr, nib)
  local v = redis.call('HGET', ctr, 'nib')
  return v and v ~= nib
end

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

-- buckets groups positions of ids by tasks bucket, in first-seen order.
local function buckets(tasks, ids)
  local groups, order = {}, {}
  for i = 1, #ids do
    local g = group(groups, order, tkey(tasks, ids[i]))
    g[#g + 1] = i
  end
  return groups, order
end

-- get_recs reads the records of ids (false where absent) with one HMGET per
-- bucket: consecutive IDs share a bucket, so a batch costs a few calls.
local function get_recs(tasks, ids)
  local out = {}
  local groups, order = buckets(tasks, ids)
  for _, k in ipairs(order) do
    local g, f = groups[k], {}
    for j = 1, #g do f[j] = ids[g[j]] end
    local vals = redis.call('HMGET', k, unpack(f))
    for j = 1, #g do out[g[j]] = vals[j] end
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
    for j = 1, #g do
      args[2 * j - 1] = pairs_[2 * g[j] - 1]
      args[2 * j] = pairs_[2 * g[j]]
    end
    redis.call('HSET', k, unpack(args))
  end
end

-- del_recs deletes the records of ids with one HDEL per bucket.
local function del_recs(tasks, ids)
  local groups, order = buckets(tasks, ids)
  for _, k in ipairs(order) do
    local g, f = groups[k], {}
    for j = 1, #g do f[j] = ids[g[j]] end
    redis.call('HDEL', k, unpack(f))
  end
end

-- reverse index: field = business key, value = comma-separated task IDs
local function idx_ids(idx, ib, key)
  local v = redis.call('HGET', ikey(idx, ib), key)
  local out = {}
  if v then for id in string.gmatch(v, '[^,]+') do out[#out + 1] = id end end
  return out
end

local function idx_set(idx, ib, key, ids)
  if #ids == 0 then redis.call('HDEL', ikey(idx, ib), key)
  else redis.call('HSET', ikey(idx, ib), key, table.concat(ids, ',')) end
end

local function idx_remove(idx, ib, key, id)
  local ids, out = idx_ids(idx, ib, key), {}
  for _, x in ipairs(ids) do if x ~= id then out[#out + 1] = x end end
  idx_set(idx, ib, key, out)
end

-- idx_drop removes gone[key] (a set of IDs) from the index entries of the
-- keys in keys (each {ib, key}): one read and one write per index bucket.
local function idx_drop(idx, keys, gone)
  local groups, order = {}, {}
  for _, kk in ipairs(keys) do
    local g = group(groups, order, kk[1])
    g[#g + 1] = kk[2]
  end
  for _, ib in ipairs(order) do
    local g, bk = groups[ib], ikey(idx, ib)
    local lists = redis.call('HMGET', bk, unpack(g))
    local empty, kept = {}, {}
    for k, key in ipairs(g) do
      local drop, left = gone[ib .. '\n' .. key], {}
      if lists[k] then
        for x in string.gmatch(lists[k], '[^,]+') do
          if not drop[x] then left[#left + 1] = x end
        end
      end
      if #left == 0 then
        empty[#empty + 1] = key
      else
        kept[#kept + 1] = key
        kept[#kept + 1] = table.concat(left, ',')
      end
    end
    if #empty > 0 then redis.call('HDEL', bk, unpack(empty)) end
    if #kept > 0 then redis.call('HSET', bk, unpack(kept)) end
  end
end

local function delete_task(tasks, idx, id, t)
  redis.call('HDEL', tkey(tasks, id), id)
  if t then idx_remove(idx, t.ib, t.key, id) end
end

-- assigner picks the scores of a run of tasks. Each gets the next seq for
-- its ms: after the last seq handed out for that ms (st.ms, st.seq: the ctr
-- hash's values, then tracked here) and after every task already due in
-- that ms (read once per ms, then tracked). More than mult tasks in one ms
-- spill into the next ms; st.overflow counts them. The caller writes
-- st.ms, st.seq and st.overflow back. st.assign(ms) returns the score, or
-- nil and a code.
local function assigner(due, epoch, mult, maxrel, last_ms, last_seq)
  local st = {ms = last_ms, seq = last_seq, overflow = 0}
  local tops = {}
  st.assign = function(ms)
    local spilled = false
    for _ = 1, 64 do
      local rel = ms - epoch
      if rel < 0 then return nil, C_BEFORE_EPOCH end
      if rel > maxrel then return nil, C_RANGE end
      local base = rel * mult
      local seq = 0
      if st.ms == ms then seq = st.seq + 1 end
      local top = tops[ms]
      if top == nil then
        local r = redis.call('ZREVRANGEBYSCORE', due, fmt(base + mult - 1), fmt(base), 'WITHSCORES', 'LIMIT', 0, 1)
        top = false
        if r[2] then top = tonumber(r[2]) - base end
      end
      if top and top + 1 > seq then seq = top + 1 end
      if seq < mult then
        -- separate statements: on gopher-lua (miniredis) a multiple
        -- assignment of these fields once gave wrong seqs
        st.ms = ms
        st.seq = seq
        tops[ms] = seq
        if spilled then st.overflow = st.overflow + 1 end
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

-- assign_score is one assigner step with the ctr hash read and written
-- around it (retry, sweep, requeue, reschedule).
local function assign_score(due, ctr, stats, ms, epoch, mult, maxrel)
  local last = redis.call('HMGET', ctr, 'ms', 'seq')
  local st = assigner(due, epoch, mult, maxrel, tonumber(last[1]), tonumber(last[2]))
  local score, code = st.assign(ms)
  if score then
    redis.call('HSET', ctr, 'ms', fmt(st.ms), 'seq', fmt(st.seq))
    if st.overflow > 0 then redis.call('HINCRBY', stats, 'overflow', st.overflow) end
  end
  return score, code
end

-- add_due inserts into the due set and pushes the wake list when the task
-- becomes the new head, so a sleeping worker re-arms its timer.
local function add_due(due, wake, id, score)
  local head = redis.call('ZRANGE', due, 0, 0, 'WITHSCORES')
  redis.call('ZADD', due, fmt(score), id)
  if (not head[2]) or score < tonumber(head[2]) then
    redis.call('LPUSH', wake, '1')
    redis.call('LTRIM', wake, 0, 0)
    redis.call('PEXPIRE', wake, 60000)
  end
end

local function to_dead(inflight, dead, tasks, stats, id, t, err, now)
  redis.call('ZREM', inflight, id)
  redis.call('ZADD', dead, fmt(now), id)
  t.err = err
  put_rec(tasks, id, build(t))
  redis.call('HINCRBY', stats, 'dead', 1)
end

-- owned returns the record when (id, fence) holds the current lease.
local function owned(tasks, inflight, id, fence)
  local blob = get_rec(tasks, id)
  if not blob then return nil, C_NOT_FOUND end
  local t = parse(blob)
  if not t then return nil, C_CORRUPT end
  if fmt(t.fence) ~= fence or not redis.call('ZSCORE', inflight, id) then return nil, C_LEASE_LOST end
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
