-- ack.lua: fenced ack of up to 1000 leases, with a bounded number of Redis
-- calls per batch and no record read: fences come from the lease hash in
-- one HMGET, the caller gives each task's key digest (fixed for the life
-- of a task; Take read it), and records, leases and index entries are
-- deleted in bulk. A task cancelled in flight is deleted the same way. Each
-- pair is checked against its fence; a task acked twice in one batch is
-- acked once (the second gets C_NOT_FOUND).
-- KEYS[1] -> tasks base   KEYS[2] -> inflight ZSET   KEYS[3] -> idx HASH
-- KEYS[4] -> stats HASH   KEYS[5] -> lease HASH
-- ARGV[3i-2] -> task ID   ARGV[3i-1] -> fence   ARGV[3i] -> digest of its
--               key ('' = read it from the record)   (1 to 1000 triples)
-- Returns {code1, code2, ...}: C_OK, C_NOT_FOUND or C_LEASE_LOST per triple.
local tasks, inflight, idx, stats, lease = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local n = #ARGV / 3
local ids = {}
for i = 1, n do ids[i] = ARGV[3 * i - 2] end
local fences = redis.call('HMGET', lease, unpack(ids))
local out, gone, byDg, dgs, removed = {}, {}, {}, {}, {}
local nr, nd = 0, 0
for i = 1, n do
  local id, code = ids[i], C_OK
  local dg = nil
  if gone[id] then
    code = C_NOT_FOUND
  elseif fences[i] ~= ARGV[3 * i - 1] then
    -- not under this fence: lost if the task still exists, else done
    code = C_LEASE_LOST
    if not fences[i] and not get_rec(tasks, id) then code = C_NOT_FOUND end
  else
    dg = ARGV[3 * i]
    if dg == '' then
      local blob = get_rec(tasks, id)
      if blob then dg = dg_of(blob) else dg = nil end
    end
    gone[id] = true
    nr = nr + 1
    removed[nr] = id
  end
  -- inline, not a lib function: a call per task cost 2% of the ack
  if dg then -- byDg[dg]: the ID (one, the common case) or a set of IDs
    local g = byDg[dg]
    if not g then
      byDg[dg] = id
      nd = nd + 1
      dgs[nd] = dg
    elseif type(g) == 'string' then
      byDg[dg] = {[g] = true, [id] = true}
    else
      g[id] = true
    end
  end
  out[i] = code
end
if nr > 0 then
  redis.call('ZREM', inflight, unpack(removed))
  redis.call('HDEL', lease, unpack(removed))
  del_recs(tasks, removed)
  if nd > 0 then idx_drop(idx, dgs, byDg) end
  redis.call('HINCRBY', stats, 'acked', nr)
end
return out
