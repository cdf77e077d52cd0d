-- Code generated from lib.lua + deadlist.lua by `go generate ./delay`; DO NOT EDIT.
-- deadlist.lua: one page of the dead-letter set, oldest first.
-- KEYS[1] -> dead ZSET   KEYS[2] -> tasks base
-- ARGV[1] -> offset   ARGV[2] -> count (1..1000)
-- Returns {C_OK, total, id1, died-at ms1, record1|'', ...}

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

-- tkey is the tasks bucket of a task ID.
local function tkey(tasks, id) return tasks .. ':' .. string.sub(id, 1, -2) end

local function get_rec(tasks, id) return redis.call('HGET', tkey(tasks, id), id) end
local out = {C_OK, redis.call('ZCARD', KEYS[1])}
local o = tonumber(ARGV[1])
local items = redis.call('ZRANGE', KEYS[1], o, o + tonumber(ARGV[2]) - 1, 'WITHSCORES')
for i = 1, #items, 2 do
  out[#out + 1] = items[i]
  out[#out + 1] = items[i + 1]
  out[#out + 1] = get_rec(KEYS[2], items[i]) or ''
end
return out
