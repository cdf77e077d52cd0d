-- index_prune.lua: drop a promotion from its slot's index once its meta
-- key is gone (expired at End + Grace, or deleted by a writer that does
-- not keep the index), checked in the same step, so a write that brought
-- the promotion back stays listed. Both keys share one slot.
-- KEYS[1] -> the promotion's meta key (HASH)
-- KEYS[2] -> the index of the promotion's slot (SET of promotion IDs)
-- ARGV[1] -> the promotion ID
-- Returns 1 when the ID was removed, 0 when meta exists or it was not there.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.call('SREM', KEYS[2], ARGV[1])
end
return 0
