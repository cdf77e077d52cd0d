-- lib.lua: helpers shared by every delay script. Go prepends this file to
-- each script body, so it declares no KEYS/ARGV of its own.
--
-- Task record (one field of the tasks hash, field = task ID):
--   "<attempt>,<fence>,<flags>,<keylen>,<toklen>,<errlen>;<key><token><err><payload>"
-- flags bit 1 = cancelled while in flight. toklen 0 means the token is the ID.
-- Scores: (ms - epoch) * mult + seq, mult = 2^bits, exactly score.TimeCodec.
-- Return codes (mirrored in scripts.go):
local C_OK, C_DUP, C_NOT_FOUND, C_LEASE_LOST = 0, 1, 2, 3
local C_BEFORE_EPOCH, C_RANGE, C_TOO_MANY, C_SEQ = 4, 5, 6, 7
local C_CORRUPT, C_CANCELLED, C_DEAD = 8, 9, 10
local F_CANCELLED = 1

local function fmt(n) return string.format('%d', n) end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- parse reads the header and the key, token and error. The payload is not
-- copied: payload_of or build take it from the original blob when needed.
local function parse(blob)
  if type(blob) ~= 'string' then return nil end
  local a, f, p3, fl, kl, tl, el, p = string.match(blob, '^(%d+),(%d+),()(%d+),(%d+),(%d+),(%d+);()')
  if not a then return nil end
  if #a > 9 or #f > 15 or #fl > 3 or #kl > 7 or #tl > 7 or #el > 7 then return nil end
  kl, tl, el = tonumber(kl), tonumber(tl), tonumber(el)
  if p - 1 + kl + tl + el > #blob then return nil end
  return {
    attempt = tonumber(a), fence = tonumber(f), flags = tonumber(fl),
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
  return fmt(t.attempt) .. ',' .. fmt(t.fence) .. ',' .. fmt(t.flags) .. ',' ..
    fmt(#t.key) .. ',' .. fmt(#t.token) .. ',' .. fmt(#t.err) .. ';' ..
    t.key .. t.token .. t.err .. payload_of(t)
end

-- rehead rewrites only attempt and fence (the hot path of take): one copy
-- of the rest of the record instead of a full rebuild.
local function rehead(t)
  return fmt(t.attempt) .. ',' .. fmt(t.fence) .. ',' .. string.sub(t.blob, t.p3)
end

local function cancelled(t) return t.flags % 2 == 1 end

-- reverse index: field = business key, value = comma-separated task IDs
local function idx_ids(idx, key)
  local v = redis.call('HGET', idx, key)
  local out = {}
  if v then for id in string.gmatch(v, '[^,]+') do out[#out + 1] = id end end
  return out
end

local function idx_set(idx, key, ids)
  if #ids == 0 then redis.call('HDEL', idx, key)
  else redis.call('HSET', idx, key, table.concat(ids, ',')) end
end

local function idx_remove(idx, key, id)
  local ids, out = idx_ids(idx, key), {}
  for _, x in ipairs(ids) do if x ~= id then out[#out + 1] = x end end
  idx_set(idx, key, out)
end

local function delete_task(tasks, idx, id, t)
  redis.call('HDEL', tasks, id)
  if t then idx_remove(idx, t.key, id) end
end

-- assign_score picks the next seq for ms: after the last seq handed out for
-- that ms and after every task already due in that ms. More than mult tasks
-- in one ms spill into the next ms (counted as overflow).
local function assign_score(due, ctr, stats, ms, epoch, mult, maxrel)
  local spilled = false
  for _ = 1, 64 do
    local rel = ms - epoch
    if rel < 0 then return nil, C_BEFORE_EPOCH end
    if rel > maxrel then return nil, C_RANGE end
    local base = rel * mult
    local seq = 0
    local last = redis.call('HMGET', ctr, 'ms', 'seq')
    if last[1] and tonumber(last[1]) == ms then seq = tonumber(last[2]) + 1 end
    local top = redis.call('ZREVRANGEBYSCORE', due, fmt(base + mult - 1), fmt(base), 'WITHSCORES', 'LIMIT', 0, 1)
    if top[2] then
      local s = tonumber(top[2]) - base + 1
      if s > seq then seq = s end
    end
    if seq < mult then
      redis.call('HSET', ctr, 'ms', fmt(ms), 'seq', fmt(seq))
      if spilled then redis.call('HINCRBY', stats, 'overflow', 1) end
      return base + seq
    end
    spilled = true
    ms = ms + 1
  end
  return nil, C_SEQ
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
  redis.call('HSET', tasks, id, build(t))
  redis.call('HINCRBY', stats, 'dead', 1)
end

-- owned returns the record when (id, fence) holds the current lease.
local function owned(tasks, inflight, id, fence)
  local blob = redis.call('HGET', tasks, id)
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
