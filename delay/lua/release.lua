-- release.lua: give back leased tasks that a worker prefetched but
-- never started (shutdown, or a lease too close to its deadline), as if
-- they had not been taken: back in due at the score they were taken at
-- (the record is untouched: a delivery that never ran is not an attempt).
-- Each is checked against its fence.
-- KEYS[1] -> tasks base   KEYS[2] -> inflight ZSET   KEYS[3] -> idx HASH
-- KEYS[4] -> due ZSET     KEYS[5] -> wake LIST       KEYS[6] -> lease HASH
-- ARGV[3i-2] -> task ID   ARGV[3i-1] -> fence   ARGV[3i] -> due score it
--               was taken at   (at most 1000 triples)
-- Returns {code1, code2, ...}: C_OK (back in due), C_CANCELLED (was
--          cancelled in flight: deleted), C_NOT_FOUND, C_LEASE_LOST or
--          C_CORRUPT per triple.
local tasks, inflight, idx, due, wake, lease = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local out = {}
for i = 1, #ARGV, 3 do
  local id = ARGV[i]
  local t, code = owned(tasks, lease, id, ARGV[i + 1])
  if t then
    end_lease(inflight, lease, id)
    if cancelled(t) then
      delete_task(tasks, idx, id, t)
      code = C_CANCELLED
    else
      add_due(due, wake, id, tonumber(ARGV[i + 2]))
      code = C_OK
    end
  end
  out[#out + 1] = code
end
return out
