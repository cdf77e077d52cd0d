-- recheck.lua: re-reads one cart line together with its promotion's meta
-- key, atomically, so that "nothing stored" (no meta) is told from
-- "damaged" (meta without its tiers, floor or ceiling), and a line whose
-- first two reads straddled a refresh sees one version.
--
-- KEYS[1] -> <prefix>:{p:<id>}:tiers   ZSET of member records
-- KEYS[2] -> <prefix>:{p:<id>}:meta    HASH, only its existence is read
-- ARGV[1] -> the query's score, integer text
-- ARGV[2] -> "1" to read the next tier above the score too, else "0"
--
-- Returns {hit, next, meta}: hit is the member at or below the score and
-- next the first member above it (false when absent, and next false when
-- not asked for); meta is 1 when the meta key exists, else 0.
local hit = redis.call('ZRANGE', KEYS[1], ARGV[1], '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, 1)[1] or false
local nxt = false
if ARGV[2] == '1' then
  nxt = redis.call('ZRANGE', KEYS[1], '(' .. ARGV[1], '+inf', 'BYSCORE', 'LIMIT', 0, 1)[1] or false
end
return {hit, nxt, redis.call('EXISTS', KEYS[2])}
