-- Match one cart line and return the hit's gift list in the same call
-- (the single-round-trip alternative measured by BenchmarkCartGifts).
-- KEYS[1] -> the promotion's tiers ZSET
-- KEYS[2] -> a HASH of the same promotion (same hash tag): member record -> gift list
-- ARGV[1] -> the query score, inclusive upper bound (an integer string)
-- Returns: 0 when the promotion does not exist; otherwise a 2-element
--          array {member record, gift list or nil}
local hit = redis.call('ZRANGE', KEYS[1], ARGV[1], '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, 1)
if #hit == 0 then
  return 0
end
return {hit[1], redis.call('HGET', KEYS[2], hit[1])}
