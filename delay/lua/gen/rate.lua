-- Code generated from lib.lua + reply.lua + take_kept.lua + rate.lua by `go generate ./delay`; DO NOT EDIT.
-- rate.lua: set or clear the queue's rate limit, the token bucket that
-- take.lua keeps in the ctl hash ('rate' tokens a second, at most 'burst'
-- held, 'tok' left at 'ts'). A new limit keeps the tokens the old one had
-- earned by now, capped at the new burst; a first limit starts full.
-- KEYS[1] -> ctl HASH   KEYS[2] -> wake LIST
-- ARGV[1] -> tasks per second (decimal text; '0' clears the limit)
-- ARGV[2] -> burst (whole tasks, 1..MaxBatch; ignored when clearing)
-- Returns {C_OK, now}. It pushes the wake list, so a worker waiting for a
-- token under the old limit takes again now.

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

-- push_wake leaves one element on the wake list, so a worker blocked on it
-- re-arms its timer. Numbers go to redis.call as text: Redis 7.0 formats
-- a Lua number argument with %.17g, which costs more than the call.
local function push_wake(wake)
  redis.call('LPUSH', wake, '1')
  redis.call('LTRIM', wake, '0', '0')
  redis.call('PEXPIRE', wake, '60000')
end

-- end of lib.lua
-- reply.lua: the kept reply of a mutating script. A call whose reply was
-- lost is sent again (go-redis retries, the Worker's own re-sends) with the
-- same KEYS and ARGV; it must not run a second time. go generate wraps
-- each mutating body into rp_body and ends the script with rp_run (see
-- Once in internal/luacompose), so the first run stores its reply under
-- the call's request key and a re-run returns that reply without running
-- the body.
-- KEYS[#KEYS] -> the call's reply name <prefix>:{q:<name>}:rp:<nonce>:<bucket>:<slot>;
--                removed from KEYS before the body runs. The reply is kept
--                in the HASH named by all before the last ':' (same hash
--                tag, so the same slot), field <slot>: one small hash per
--                64 calls of a Queue costs a few tens of bytes a reply,
--                where a key of its own cost about 150
--                (TestMemoryPerKeptReply).
-- ARGV[#ARGV] -> how long the reply is kept, ms (its hash's time in the
--                reply index is moved to Redis TIME + this at every reply
--                it keeps, rp_file); removed from ARGV likewise
-- Returns the body's reply, or the kept one.
-- Error replies (error tables, script errors) are never kept: a re-run
-- runs the body again.
--
-- rp_enc appends the exact encoding of a reply value to e: '*n:' then n
-- elements for an array (Redis stops at the first nil, so does this),
-- ':<int>;' for a number (Redis truncates it to an integer; '%d' does the
-- same and, unlike tostring's %.14g, stays exact up to 2^53), '$len:'
-- then the bytes for a string, ':1;' for true, '_' for false and nil.
-- The pieces become one string.format per 500 values (e.f the format,
-- e.a its arguments): a format call per value, or Lua's own number to
-- text, cost several times as much. '%s' copies a string whole unless it
-- is shorter than 100 bytes and holds a zero byte (Lua 5.1 formats those
-- with sprintf): such a string goes to e.out as it is.
local function rp_flush(e)
  if #e.f > 0 then
    e.out[#e.out + 1] = string.format(table.concat(e.f), unpack(e.a))
    e.f, e.a = {}, {}
  end
end
local function rp_enc(v, e)
  local t = type(v)
  local f, a = e.f, e.a
  if t == 'table' then
    local n = 0
    while v[n + 1] ~= nil do n = n + 1 end
    f[#f + 1] = '*%d:'
    a[#a + 1] = n
    for i = 1, n do
      local x = v[i]
      local tx = type(x)
      if tx == 'number' then
        f[#f + 1] = ':%d;'
        a[#a + 1] = x
      elseif tx == 'string' and (#x >= 100 or not string.find(x, '\0', 1, true)) then
        f[#f + 1] = '$%d:%s'
        a[#a + 1] = #x
        a[#a + 1] = x
      else
        rp_enc(x, e)
        f, a = e.f, e.a
      end
      if #a >= 500 then
        rp_flush(e)
        f, a = e.f, e.a
      end
    end
  elseif t == 'number' then
    f[#f + 1] = ':%d;'
    a[#a + 1] = v
  elseif t == 'string' then
    f[#f + 1] = '$%d:'
    a[#a + 1] = #v
    rp_flush(e)
    e.out[#e.out + 1] = v
  elseif v == true then
    f[#f + 1] = ':1;'
  else
    f[#f + 1] = '_'
  end
end
-- rp_dec reads the value rp_enc wrote at position p of s and returns it
-- with the position after it (false for nil, which Redis replies as nil).
local function rp_dec(s, p)
  local c = string.byte(s, p)
  if c == 42 then -- '*'
    local e = string.find(s, ':', p, true)
    local n, r = tonumber(string.sub(s, p + 1, e - 1)), {}
    p = e + 1
    for i = 1, n do r[i], p = rp_dec(s, p) end
    return r, p
  elseif c == 58 then -- ':'
    local e = string.find(s, ';', p, true)
    return tonumber(string.sub(s, p + 1, e - 1)), e + 1
  elseif c == 36 then -- '$'
    local e = string.find(s, ':', p, true)
    local n = tonumber(string.sub(s, p + 1, e - 1))
    return string.sub(s, e + 1, e + n), e + n + 1
  end
  return false, p + 1
end
-- rp_concat is table.concat(out) in runs of 1000: miniredis's Lua puts
-- every element of one concat on its registry (about 5k slots).
local function rp_concat(out)
  local n = #out
  if n <= 1000 then return table.concat(out) end
  local runs = {}
  for i = 1, n, 1000 do runs[#runs + 1] = table.concat(out, '', i, math.min(i + 999, n)) end
  return table.concat(runs)
end
-- rp_file files a reply hash in the queue's reply index, the ZSET
-- <prefix>:{q:<name>}:rp:idx (hash -> Redis TIME ms + ttl of its latest
-- reply), and when the hash is new there, deletes up to RP_SWEEP hashes
-- whose time has passed. The hashes carry no TTL, so no volatile-*
-- eviction policy can take a reply before its call's last re-send; a
-- call files at most one new hash, so sweeping two at each new one
-- keeps up with any number of Queues, short-lived ones included.
local function rp_file(key, ttl)
  local RP_SWEEP = 2
  local t = redis.call('TIME')
  local now = t[1] * 1000 + math.floor(t[2] / 1000)
  local idx = string.sub(key, 1, string.find(key, '}', 1, true)) .. ':rp:idx'
  if redis.call('ZADD', idx, now + ttl, key) == 0 then return end
  local old = redis.call('ZRANGEBYSCORE', idx, '-inf', now, 'LIMIT', 0, RP_SWEEP)
  if #old > 0 then
    redis.call('DEL', unpack(old))
    redis.call('ZREM', idx, unpack(old))
  end
end
-- rp_run runs body once per reply key. keep (optional) returns what is
-- stored of the reply: a string kept as it is, or a table (or nil: the
-- reply itself) kept through rp_enc; grow turns the stored string back
-- into the reply.
local function rp_run(body, keep, grow)
  local key = table.remove(KEYS)
  local ttl = table.remove(ARGV)
  local cut = string.find(key, ':[^:}]*$') -- after the tag: the name has ':rp:'
  local field = string.sub(key, cut + 1)
  key = string.sub(key, 1, cut - 1)
  local kept = redis.call('HGET', key, field)
  if kept then
    if grow then return grow(kept) end
    return (rp_dec(kept, 1))
  end
  local r = body()
  if type(r) == 'table' and (r.err or r.ok) then return r end
  local s = keep and keep(r)
  if type(s) ~= 'string' then
    local e = {f = {}, a = {}, out = {}}
    rp_enc(s or r, e)
    rp_flush(e)
    s = rp_concat(e.out)
  end
  redis.call('HSET', key, field, s)
  rp_file(key, ttl)
  return r
end
local function rp_body()
local ctl, wake = KEYS[1], KEYS[2]
local now = now_ms()
local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
-- Go sends 1..MaxBatch (Rate.withDefaults); the bucket never holds more
-- than one take's worth, so a burst stored here is one take.lua keeps
local MAX_BURST = 1000
burst = math.max(1, math.min(MAX_BURST, math.floor(burst)))
local old = redis.call('HMGET', ctl, 'rate', 'burst', 'tok', 'ts')
if rate <= 0 then
  if old[1] then
    redis.call('HDEL', ctl, 'rate', 'burst', 'tok', 'ts')
    push_wake(wake)
  end
  return {C_OK, now}
end
local tok = burst
if old[1] then
  -- read as take.lua reads them, whatever a stray write left: a burst
  -- missing or past MAX_BURST, a rate not above 0, tokens of -inf or NaN
  local orate, oburst = tonumber(old[1]), math.min(MAX_BURST, tonumber(old[2]) or 1)
  if not (orate and orate > 0) then orate = 0 end
  local otok, ots = tonumber(old[3]) or oburst, tonumber(old[4]) or now
  if not (otok > -1) then otok = 0 end
  if now > ots then otok = math.min(oburst, otok + (now - ots) * orate / 1000) end
  tok = math.min(burst, otok)
end
redis.call('HSET', ctl, 'rate', ARGV[1], 'burst', fmt(burst), 'tok', string.format('%.17g', tok), 'ts', fmt(now))
push_wake(wake)
return {C_OK, now}

end
return rp_run(rp_body)
