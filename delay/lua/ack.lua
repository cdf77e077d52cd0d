-- ack.lua: fenced ack of up to 1000 leases, with a bounded number of Redis
-- calls per batch: records read and deleted per tasks bucket, lease scores
-- in one ZMSCORE, index entries deleted per index bucket (read first only
-- for a key that holds more than one task, see F_SOLE). Each
-- pair is checked against its fence; a task acked twice in one batch is
-- acked once (the second gets C_NOT_FOUND).
-- KEYS[1] -> tasks base   KEYS[2] -> inflight ZSET   KEYS[3] -> idx base
-- KEYS[4] -> stats HASH
-- ARGV[2i-1] -> task ID   ARGV[2i] -> fence   (1 to 1000 pairs)
-- Returns {code1, code2, ...}: C_OK, C_CANCELLED (was cancelled, removed),
--          C_NOT_FOUND, C_LEASE_LOST or C_CORRUPT per pair.
local tasks, inflight, idx, stats = KEYS[1], KEYS[2], KEYS[3], KEYS[4]

-- fields reads what ack needs of a record (fence as text, flags, index
-- bucket, key) with one copy: parse makes three, and this loop runs once
-- per task. nil means unreadable.
local function fields(blob)
  local a, f, _, fl, ib, kl, _, _, p = header(blob)
  if not a then return nil end
  return {fence = f, flags = tonumber(fl), ib = ib, key = string.sub(blob, p, p + kl - 1)}
end
local n = #ARGV / 2
local ids = {}
for i = 1, n do ids[i] = ARGV[2 * i - 1] end
local blobs = get_recs(tasks, ids)
local leases = redis.call('ZMSCORE', inflight, unpack(ids))
local out, gone, byKey, keys = {}, {}, {}, {}
local removed, soles, sorder = {}, {}, {}
for i = 1, n do
  local id, code = ids[i], C_OK
  local t = nil
  if gone[id] or not blobs[i] then
    code = C_NOT_FOUND
  else
    t = fields(blobs[i])
    if not t then
      code = C_CORRUPT
    elseif t.fence ~= ARGV[2 * i] or not leases[i] then
      code, t = C_LEASE_LOST, nil
    end
  end
  if t then
    gone[id] = true
    removed[#removed + 1] = id
    if sole(t) then -- its index entry is exactly this ID: delete it unread
      local g = group(soles, sorder, t.ib)
      g[#g + 1] = t.key
    else
      local kk = t.ib .. '\n' .. t.key
      if not byKey[kk] then
        byKey[kk] = {}
        keys[#keys + 1] = {t.ib, t.key}
      end
      byKey[kk][id] = true
    end
    if cancelled(t) then code = C_CANCELLED end
  end
  out[i] = code
end
if #removed > 0 then
  redis.call('ZREM', inflight, unpack(removed))
  del_recs(tasks, removed)
  for _, ib in ipairs(sorder) do redis.call('HDEL', ikey(idx, ib), unpack(soles[ib])) end
  if #keys > 0 then idx_drop(idx, keys, byKey) end
  redis.call('HINCRBY', stats, 'acked', #removed)
end
return out
