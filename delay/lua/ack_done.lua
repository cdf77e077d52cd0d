-- ack_done.lua: fenced ack of up to 1000 leases that keeps a tombstone
-- (Options.DoneTTL) for each task enqueued with a caller's token: its
-- record, rewritten without payload and flagged F_DONE, stays in its
-- bucket and in its index entry, and the done ZSET holds its end, for the
-- sweep. Other tasks (generated token, cancelled in flight, unreadable)
-- are deleted as ack.lua deletes them. Acking a tombstone is C_NOT_FOUND.
-- KEYS[1] -> tasks base   KEYS[2] -> inflight ZSET   KEYS[3] -> idx HASH
-- KEYS[4] -> stats HASH   KEYS[5] -> lease HASH      KEYS[6] -> done ZSET
-- ARGV[1] -> tombstone lifetime ms
-- ARGV[3i-1] -> task ID   ARGV[3i] -> fence   ARGV[3i+1] -> unused (the
--               key digest ack.lua takes; the record is read here anyway)
--               (1 to 1000 triples)
-- Returns {code1, code2, ...}: C_OK, C_NOT_FOUND or C_LEASE_LOST per triple.
local tasks, inflight, idx, stats, lease, done = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local n = (#ARGV - 1) / 3
local ids = {}
for i = 1, n do ids[i] = ARGV[3 * i - 1] end
local fences = redis.call('HMGET', lease, unpack(ids))
local blobs = get_recs(tasks, ids)
local out, gone, removed, nr = {}, {}, {}, 0
local stones, ends, ns = {}, {}, 0
local deleted, dgs, dids, nd = {}, {}, {}, 0
local until_ms = fmt(now_ms() + tonumber(ARGV[1]))
for i = 1, n do
  local id, code = ids[i], C_OK
  if gone[id] then
    code = C_NOT_FOUND
  elseif fences[i] ~= ARGV[3 * i] then
    code = C_LEASE_LOST
    local f = blobs[i] and flags_of(blobs[i])
    if not fences[i] and (not blobs[i] or (f and is_done(f))) then code = C_NOT_FOUND end
  else
    gone[id] = true
    nr = nr + 1
    removed[nr] = id
    local t = parse(blobs[i])
    if t and t.token ~= '' and not cancelled(t) then
      t.flags = t.flags + F_DONE
      t.err = ''
      t.payload = ''
      stones[2 * ns + 1] = id
      stones[2 * ns + 2] = build(t)
      ends[2 * ns + 1] = until_ms
      ends[2 * ns + 2] = id
      ns = ns + 1
    else
      local dg = nil
      if t then dg = t.dg elseif blobs[i] then dg = dg_of(blobs[i]) end
      deleted[#deleted + 1] = id
      if dg then
        nd = nd + 1
        dgs[nd] = dg
        dids[nd] = id
      end
    end
  end
  out[i] = code
end
if nr > 0 then
  redis.call('ZREM', inflight, unpack(removed))
  redis.call('HDEL', lease, unpack(removed))
  if ns > 0 then
    put_recs(tasks, stones)
    redis.call('ZADD', done, unpack(ends))
  end
  if #deleted > 0 then del_recs(tasks, deleted) end
  if nd > 0 then idx_unlist(idx, dgs, dids) end
  redis.call('HINCRBY', stats, 'acked', nr)
end
return out
