-- repair.lua: put back a lost ID counter and a lost index from what Go
-- read of the records (Queue.Repair), atomically.
-- KEYS[1] -> ctr HASH   KEYS[2] -> idx HASH   KEYS[3] -> stats HASH
-- ARGV[1] -> the highest task ID number found (records and sets), decimal
-- ARGV[2] -> '1': rebuild the index (it is written only if still absent)
-- ARGV[3] -> n, the number of index entries that follow
-- ARGV[4 .. 3+2n] -> digest, comma-separated IDs (the rebuilt entries)
-- Returns {C_OK, counter raised (0|1), index rebuilt (0|1)}
-- The counter only moves up (a concurrent enqueue may have moved it past
-- what was read). A rebuilt index keeps a marker field '~' (no digest has
-- it), so an index whose entries are all gone again still exists and is
-- not taken for lost.
local ctr, idx, stats = KEYS[1], KEYS[2], KEYS[3]
local top = tonumber(ARGV[1])
local cur = tonumber(redis.call('HGET', ctr, 'id') or '-1')
local raised, rebuilt = 0, 0
if cur == nil or cur < top then
  redis.call('HSET', ctr, 'id', fmt(top))
  redis.call('HINCRBY', stats, 'ctr_lost', 1)
  raised = 1
end
if ARGV[2] == '1' and redis.call('EXISTS', idx) == 0 then
  local n = tonumber(ARGV[3])
  redis.call('HSET', idx, '~', '1')
  for s = 0, n - 1, 500 do
    local args = {}
    for k = s, math.min(s + 499, n - 1) do
      args[#args + 1] = ARGV[4 + 2 * k]
      args[#args + 1] = ARGV[5 + 2 * k]
    end
    redis.call('HSET', idx, unpack(args))
  end
  redis.call('HINCRBY', stats, 'idx_lost', 1)
  rebuilt = 1
end
return {C_OK, raised, rebuilt}
