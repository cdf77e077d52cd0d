-- index_add.lua: put a promotion found by SCAN into its slot's index, only
-- if its meta key still exists (a Delete since the SCAN removed it from
-- the index, and must not be undone). Both keys share one slot.
-- KEYS[1] -> the promotion's meta key (HASH)
-- KEYS[2] -> the index of the promotion's slot (SET of promotion IDs)
-- ARGV[1] -> the promotion ID
-- Returns 1 when the ID was added, 0 when it was there or meta is gone.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.call('SADD', KEYS[2], ARGV[1])
end
return 0
