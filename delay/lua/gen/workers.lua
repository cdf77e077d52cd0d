-- Code generated from lib.lua + workers.lua by `go generate ./delay`; DO NOT EDIT.
-- workers.lua: the live pools of one server and key prefix, with their
-- last heartbeat and Redis TIME, so that a reader computes each entry's
-- age on the server's clock, not its own. IDs whose entry expired leave
-- the live set here, in the same script that found them gone, so a pool
-- that beats again meanwhile is never dropped. Not wrapped by once: it
-- only drops what is already gone.
-- KEYS[1] -> live ZSET   KEYS[2] -> entry base <prefix>:{workers}:w:
--            (an entry is the base followed by the pool ID)
-- Returns {C_OK, now, id1, beat1, entry1, ...}: each live pool's ID, last
--          heartbeat (Unix ms, Redis TIME) and WorkerInfo JSON, by ID.

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

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local live, base = KEYS[1], KEYS[2]
local out = {C_OK, now_ms()}
local ids = redis.call('ZRANGE', live, 0, -1, 'WITHSCORES')
local gone = {}
for i = 1, #ids, 2 do
  local v = redis.call('GET', base .. ids[i])
  if v then
    out[#out + 1] = ids[i]
    out[#out + 1] = ids[i + 1]
    out[#out + 1] = v
  else
    gone[#gone + 1] = ids[i]
  end
end
for i = 1, #gone, 500 do
  redis.call('ZREM', live, unpack(gone, i, math.min(i + 499, #gone)))
end
return out
