-- Code generated from lib.lua + registry.lua by `go generate ./delay`; DO NOT EDIT.
-- registry.lua: one heartbeat of a pool in the worker registry of one
-- server and key prefix. The pool's ID is claimed with an owner token
-- (random, drawn by each Run): the entry is written only while the ID is
-- free or held by this token, so a second live pool under the same ID is
-- refused instead of overwriting the first one's entry. The live set is
-- scored by Redis TIME, never by a process clock. Not wrapped by once: a
-- re-sent call writes the same entry under the same token again.
-- KEYS[1] -> entry STRING <prefix>:{workers}:w:<id>
-- KEYS[2] -> owner STRING <prefix>:{workers}:o:<id>
-- KEYS[3] -> live ZSET    <prefix>:{workers}:live
-- ARGV[1] -> pool ID   ARGV[2] -> owner token   ARGV[3] -> entry JSON
-- ARGV[4] -> TTL of the entry and of its owner, ms
-- ARGV[5] -> claim not before (Unix ms, Redis TIME; 0: at once): a pool
--            that saw another token hold the ID claims a free ID only
--            from then, so a live holder whose keys a server lost
--            (restart, flush) claims its ID back first
-- Returns {C_OK, now} when the entry was written; {C_DUP, now, beat,
--          holder, pttl} when another token holds the ID (nothing
--          written): beat is the holder's last heartbeat (Unix ms, Redis
--          TIME; '' if unlisted), holder its token and pttl what is left
--          of its owner key; {C_DUP, now, '', '', 0} when the ID is free
--          but ARGV[5] is still ahead (nothing written).

-- lib.lua: helpers shared by every delay script. go generate ./delay
-- prepends this file's prelude and the functions a body uses to that body
-- (lua/gen), so it declares no KEYS/ARGV of its own.
--
-- Records are bucketed: the tasks key a script gets in KEYS is a base name,
-- and a record lives in the hash <tasks>:<task ID minus its last base-36
-- digit> (36 consecutive IDs per bucket). Small hashes stay
-- listpack-encoded, which is what keeps a pending task near 200 B; a
-- bucket name keeps the base key's hash tag, so every key a script touches
-- is still on the slot of its KEYS.
--
-- Reverse index: one hash, field = the business key's digest (6
-- characters, computed in Go, stored in each record), value = the
-- comma-separated IDs of the tasks of every key with that digest. Keys
-- rarely share a digest, and whoever reads an entry tells its keys apart
-- by the key in each record.
--
-- Task record (one field of a tasks bucket, field = task ID):
--   "<flags><digest><attempt>,<keylen>,<toklen>,<errlen>;<key><token><err><payload>"
-- flags is one digit: bit 1 (F_CANCELLED) = cancelled while in flight; bit
-- 2 (F_SOLE) = the only task of its index entry, so the entry is exactly
-- its ID (delete_task drops the entry without reading it). digest is the key's,
-- DIGEST_LEN characters: both sit at fixed places, so the hot paths read
-- them without a pattern match. attempt counts the deliveries that ended
-- without an ack (retry, expired lease); the delivery in hand is attempt+1.
-- toklen 0 means the token is the ID. Fresh records are built in Go
-- (freshRecord), with F_SOLE set.
--
-- Leases: the lease hash maps each task in flight to the fence of its
-- current delivery (the inflight ZSET has its deadline). Take writes the
-- two and leaves the record alone: a record changes only when its task
-- does (retry, expiry, cancel), not on every delivery.
-- Scores: (ms - epoch) * mult + seq, mult = 2^bits, exactly score.TimeCodec.
-- Return codes (mirrored in scripts.go, compared by TestLibConstantsMatchGo):
local C_OK, C_DUP, C_NOT_FOUND, C_LEASE_LOST = 0, 1, 2, 3
local C_BEFORE_EPOCH, C_RANGE, C_TOO_MANY, C_SEQ = 4, 5, 6, 7
local C_CORRUPT, C_CANCELLED, C_DEAD = 8, 9, 10
-- C_CTR_LOST: the ID counter is gone (or behind a record) while the queue
-- holds tasks; C_IDX_LOST: the index is gone while it does; C_RESTORED: a
-- record found in no set was put back in due. Refusals write nothing.
local C_CTR_LOST, C_IDX_LOST, C_RESTORED = 11, 12, 13
-- C_PAUSED: take found the queue paused (the ctl hash's 'paused') and
-- took nothing.
local C_PAUSED = 14
local F_CANCELLED, F_SOLE, F_DONE = 1, 2, 4
local DIGEST_LEN = 6 -- digestLen in keys.go
local BUCKET_IDS = 36 -- the IDs one tasks bucket can hold (the last digit)
-- The index holds a marker field IDX_MARK (no digest has it) from the
-- first enqueue on, read in the same HMGET as the entries: an index
-- without it is new, or gone (checked then), at no cost on the hot path.
local IDX_MARK = '~'
-- The high-water mark of the per-ms score space (hw_note) is kept per
-- window of this many ms of Redis TIME (highWaterWindowMs in Go).
local HIGH_WATER_WINDOW_MS = 60000
-- A record's err field keeps its task's last ERRS_KEPT error texts,
-- oldest first, each as ERR_MARK <len> ':' <text>, the oldest dropped
-- while they add up to more than ERRS_BYTES (the newest is always kept;
-- Go caps one text at 1024 bytes). One text that does not start with
-- ERR_MARK is stored bare, as every record before this list was, so a
-- bare field is that one text.
local ERRS_KEPT, ERRS_BYTES = 3, 2048 -- errsKept, errsBytes in record.go
local ERR_MARK = '\030'
local DG = '[%w_%-][%w_%-][%w_%-][%w_%-][%w_%-][%w_%-]'
local HEADER = '^(%d)(' .. DG .. ')(%d+),(%d+),(%d+),(%d+);()'

local function fmt(n) return string.format('%d', n) end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- header is the one check of a record's header: bounded fields, lengths
-- within the record. It returns flags and digest (text), attempt and the
-- three lengths as numbers, and the position of the key; nil when
-- unreadable.
local function header(blob)
  if type(blob) ~= 'string' then return nil end
  local fl, dg, a, kl, tl, el, p = string.match(blob, HEADER)
  if not fl then return nil end
  if #a > 9 or #kl > 7 or #tl > 7 or #el > 7 then return nil end
  kl, tl, el = tonumber(kl), tonumber(tl), tonumber(el)
  if p - 1 + kl + tl + el > #blob then return nil end
  return fl, dg, tonumber(a), kl, tl, el, p
end

-- parse reads the header and the key, token and error. The payload is not
-- copied: payload_of or build take it from the original blob when needed.
local function parse(blob)
  local fl, dg, a, kl, tl, el, p = header(blob)
  if not fl then return nil end
  return {
    attempt = a, flags = tonumber(fl), dg = dg,
    key = string.sub(blob, p, p + kl - 1),
    token = string.sub(blob, p + kl, p + kl + tl - 1),
    err = string.sub(blob, p + kl + tl, p + kl + tl + el - 1),
    blob = blob, poff = p + kl + tl + el,
  }
end

local function payload_of(t)
  if t.payload == nil then t.payload = string.sub(t.blob, t.poff) end
  return t.payload
end

local function build(t)
  return fmt(t.flags) .. t.dg .. fmt(t.attempt) .. ',' ..
    fmt(#t.key) .. ',' .. fmt(#t.token) .. ',' .. fmt(#t.err) .. ';' ..
    t.key .. t.token .. t.err .. payload_of(t)
end

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

-- buckets groups positions of ids (the IDs themselves, with as_ids) by
-- tasks bucket (the bucket key), in first-seen order; each group's length
-- is its n. Runs of IDs from one bucket (the common case: IDs are handed
-- out in order) cost one lookup and one key per run, not per ID.
local function buckets(tasks, ids, as_ids)
  local groups, order = {}, {}
  local last, g, k = nil, nil, 0
  for i = 1, #ids do
    local pre = string.sub(ids[i], 1, -2)
    if pre ~= last then
      if g then g.n = k end
      last = pre
      local bk = tasks .. ':' .. pre
      g = groups[bk]
      if g then
        k = g.n
      else
        g, k = {}, 0
        groups[bk] = g
        order[#order + 1] = bk
      end
    end
    k = k + 1
    if as_ids then g[k] = ids[i] else g[k] = i end
  end
  if g then g.n = k end
  return groups, order
end

-- get_recs reads the records of ids (false where absent) with one HMGET per
-- bucket: consecutive IDs share a bucket, so a batch costs a few calls.
-- A bucket asked for BUCKET_IDS IDs (all it can hold, unless some repeat)
-- is read whole with HGETALL instead: HMGET scans the bucket's listpack
-- from its start for each field, which cost 2,200 instructions a task in
-- take, where one pass hands over every record. Its records come in
-- insertion order, which is ID order unless a task was put back, so they
-- are matched in step and looked up by field only past a mismatch.
local function get_recs(tasks, ids)
  local out = {}
  local groups, order = buckets(tasks, ids)
  for _, k in ipairs(order) do
    local g = groups[k]
    if g.n == BUCKET_IDS then
      local kv, p, byf = redis.call('HGETALL', k), 1, nil
      for j = 1, BUCKET_IDS do
        local at, id = g[j], ids[g[j]]
        if kv[p] == id then
          out[at] = kv[p + 1]
          p = p + 2
        else
          if not byf then
            byf = {}
            for x = 1, #kv, 2 do byf[kv[x]] = kv[x + 1] end
          end
          out[at] = byf[id] or false
        end
      end
    else
      local f = {}
      for j = 1, g.n do f[j] = ids[g[j]] end
      local vals = redis.call('HMGET', k, unpack(f))
      for j = 1, g.n do out[g[j]] = vals[j] end
    end
  end
  return out
end

-- entry_ids splits an index entry (nil: none) into its IDs.
local function entry_ids(v)
  local out = {}
  if v then for id in string.gmatch(v, '[^,]+') do out[#out + 1] = id end end
  return out
end

-- entry reads the index entry of digest dg and the records of its IDs.
-- It returns ids, the live IDs in entry order (an ID whose record is gone
-- is stale and left out, so a rewrite drops it); mine, those whose record
-- holds key; and recs, ID -> parsed record (false when unreadable: kept
-- in the entry, counted for no key). pre is the entry when the caller
-- read it already (false: none).
local function entry(tasks, idx, dg, key, pre)
  if pre == nil then pre = redis.call('HGET', idx, dg) end
  local all = entry_ids(pre)
  local ids, mine, recs = {}, {}, {}
  if #all == 0 then return ids, mine, recs end
  local blobs = get_recs(tasks, all)
  for k, id in ipairs(all) do
    local blob = blobs[k]
    if blob then
      ids[#ids + 1] = id
      local t = parse(blob)
      recs[id] = t or false
      if t and t.key == key then mine[#mine + 1] = id end
    end
  end
  return ids, mine, recs
end

local entry, owner, live = KEYS[1], KEYS[2], KEYS[3]
local now = now_ms()
local holder = redis.call('GET', owner)
if holder and holder ~= ARGV[2] then
  return {C_DUP, now, redis.call('ZSCORE', live, ARGV[1]) or '', holder, redis.call('PTTL', owner)}
end
if not holder and now < tonumber(ARGV[5]) then
  return {C_DUP, now, '', '', 0}
end
redis.call('SET', owner, ARGV[2], 'PX', ARGV[4])
redis.call('SET', entry, ARGV[3], 'PX', ARGV[4])
redis.call('ZADD', live, now, ARGV[1])
return {C_OK, now}
