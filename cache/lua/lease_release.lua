-- lease_release.lua: give back a read-through load lease, only if it is
-- still ours (it may have expired and been taken by another process,
-- whose lease must stay).
-- KEYS[1] -> the promotion's lease key (STRING, set with SET NX PX)
-- ARGV[1] -> the token this process set it to
-- Returns 1 when the lease was ours and is deleted, 0 otherwise.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
