-- pause.lua: pause or resume taking from the queue. A pause is the ctl
-- hash's 'paused' field, the Unix ms it began; take.lua reads it on every
-- take, so once this script has run no worker of any process takes a
-- task until the resume. Nothing else stops: enqueue, cancel, reschedule,
-- acks of tasks in flight and the sweep of expired leases all go on.
-- KEYS[1] -> ctl HASH   KEYS[2] -> wake LIST
-- ARGV[1] -> '1' pause, '0' resume
-- Returns {C_OK, now, since|'', changed}: since is the start of the pause
--          in force after the call (Unix ms; '' when running), changed 1
--          when this call paused a running queue or resumed a paused one,
--          0 when it found the queue already so. A resume pushes the wake
--          list, so a worker waiting on it takes at once.
local ctl, wake = KEYS[1], KEYS[2]
local now = now_ms()
local since = redis.call('HGET', ctl, 'paused')
if ARGV[1] == '1' then
  if since then return {C_OK, now, since, 0} end
  redis.call('HSET', ctl, 'paused', fmt(now))
  return {C_OK, now, fmt(now), 1}
end
if not since then return {C_OK, now, '', 0} end
redis.call('HDEL', ctl, 'paused')
push_wake(wake)
return {C_OK, now, '', 1}
