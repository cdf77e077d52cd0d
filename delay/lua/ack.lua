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
local argv = ARGV
local n = #argv / 3
local ids = {}
for i = 1, n do ids[i] = argv[3 * i - 2] end
local fences = redis.call('HMGET', lease, unpack(ids))
-- rdg[i]: the key digest of pair i when it is acked (false: none to
-- drop). While every pair is acked (the common case) ids and rdg are the
-- lists the writes take, as they are. No table keyed by ID (one cost 3%
-- of an ack): a repeated ID is found after the ZREM, below.
local out, rdg = {}, {}
local nodg, refused = false, false
for i = 1, n do
  local code = C_OK
  if fences[i] ~= argv[3 * i - 1] then
    -- not under this fence: lost if the task still exists, else done
    code = C_LEASE_LOST
    refused = true
    if not fences[i] and not get_rec(tasks, ids[i]) then code = C_NOT_FOUND end
  else
    local dg = argv[3 * i]
    if dg == '' then
      local blob = get_rec(tasks, ids[i])
      if blob then dg = dg_of(blob) else dg, nodg = false, true end
    end
    rdg[i] = dg
  end
  out[i] = code
end
-- removed: the IDs acked, rdg their digests, in batch order
local removed, nr = ids, n
if refused then
  local d = {}
  removed, nr = {}, 0
  for i = 1, n do
    if out[i] == C_OK then
      nr = nr + 1
      removed[nr] = ids[i]
      d[nr] = rdg[i]
    end
  end
  rdg = d
end
if nr > 0 then
  if redis.call('ZREM', inflight, unpack(removed)) < nr or refused then
    -- fewer removed than acked (an ID acked twice, or one not in
    -- inflight), or a pair refused (it may follow an ack of its ID): an
    -- ID is acked at its first pair under its fence, and every later pair
    -- of it gets C_NOT_FOUND.
    local first, seen, k = {}, {}, 0
    for i = 1, n do
      local id = ids[i]
      if first[id] then out[i] = C_NOT_FOUND
      elseif out[i] == C_OK then first[id] = true end
    end
    for j = 1, nr do
      local id = removed[j]
      if not seen[id] then
        seen[id] = true
        k = k + 1
        removed[k] = id
        rdg[k] = rdg[j]
      end
    end
    for j = k + 1, nr do
      removed[j] = nil
      rdg[j] = nil
    end
    nr = k
  end
  redis.call('HDEL', lease, unpack(removed))
  del_recs(tasks, removed)
  if nodg then
    local d, r, m = {}, {}, 0
    for j = 1, nr do
      if rdg[j] then
        m = m + 1
        d[m] = rdg[j]
        r[m] = removed[j]
      end
    end
    if m > 0 then idx_unlist(idx, d, r) end
  else
    idx_unlist(idx, rdg, removed)
  end
  redis.call('HINCRBY', stats, 'acked', nr)
end
return out
