-- ack.lua: fenced ack of up to 1000 leases, with a constant number of
-- Redis calls per batch (records, lease scores and index entries read and
-- written in bulk). Each pair is checked against its fence; a task acked
-- twice in one batch is acked once (the second gets C_NOT_FOUND).
-- KEYS[1] -> tasks HASH   KEYS[2] -> inflight ZSET   KEYS[3] -> idx HASH
-- KEYS[4] -> stats HASH
-- ARGV[2i-1] -> task ID   ARGV[2i] -> fence   (1 to 1000 pairs)
-- Returns {code1, code2, ...}: C_OK, C_CANCELLED (was cancelled, removed),
--          C_NOT_FOUND, C_LEASE_LOST or C_CORRUPT per pair.
local tasks, inflight, idx, stats = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local n = #ARGV / 2
local ids = {}
for i = 1, n do ids[i] = ARGV[2 * i - 1] end
local blobs = redis.call('HMGET', tasks, unpack(ids))
local leases = redis.call('ZMSCORE', inflight, unpack(ids))
local out, gone, byKey, keys = {}, {}, {}, {}
local removed = {}
for i = 1, n do
  local id, code = ids[i], C_OK
  local t = nil
  if gone[id] or not blobs[i] then
    code = C_NOT_FOUND
  else
    t = parse(blobs[i])
    if not t then
      code = C_CORRUPT
    elseif fmt(t.fence) ~= ARGV[2 * i] or not leases[i] then
      code, t = C_LEASE_LOST, nil
    end
  end
  if t then
    gone[id] = true
    removed[#removed + 1] = id
    if not byKey[t.key] then
      byKey[t.key] = {}
      keys[#keys + 1] = t.key
    end
    byKey[t.key][id] = true
    if cancelled(t) then code = C_CANCELLED end
  end
  out[i] = code
end
if #removed > 0 then
  redis.call('ZREM', inflight, unpack(removed))
  redis.call('HDEL', tasks, unpack(removed))
  local lists = redis.call('HMGET', idx, unpack(keys))
  local empty, kept = {}, {}
  for k, key in ipairs(keys) do
    local left = {}
    if lists[k] then
      for x in string.gmatch(lists[k], '[^,]+') do
        if not byKey[key][x] then left[#left + 1] = x end
      end
    end
    if #left == 0 then
      empty[#empty + 1] = key
    else
      kept[#kept + 1] = key
      kept[#kept + 1] = table.concat(left, ',')
    end
  end
  if #empty > 0 then redis.call('HDEL', idx, unpack(empty)) end
  if #kept > 0 then redis.call('HSET', idx, unpack(kept)) end
  redis.call('HINCRBY', stats, 'acked', #removed)
end
return out
