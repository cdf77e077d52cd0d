-- rate.lua: set or clear the queue's rate limit, the token bucket that
-- take.lua keeps in the ctl hash ('rate' tokens a second, at most 'burst'
-- held, 'tok' left at 'ts'). A new limit keeps the tokens the old one had
-- earned by now, capped at the new burst; a first limit starts full.
-- KEYS[1] -> ctl HASH   KEYS[2] -> wake LIST
-- ARGV[1] -> tasks per second (decimal text; '0' clears the limit)
-- ARGV[2] -> burst (whole tasks, 1..MaxBatch; ignored when clearing)
-- Returns {C_OK, now}. It pushes the wake list, so a worker waiting for a
-- token under the old limit takes again now.
local ctl, wake = KEYS[1], KEYS[2]
local now = now_ms()
local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
-- Go sends 1..MaxBatch (Rate.withDefaults); the bucket never holds more
-- than one take's worth, so a burst stored here is one take.lua keeps
local MAX_BURST = 1000
burst = math.max(1, math.min(MAX_BURST, math.floor(burst)))
local old = redis.call('HMGET', ctl, 'rate', 'burst', 'tok', 'ts')
if rate <= 0 then
  if old[1] then
    redis.call('HDEL', ctl, 'rate', 'burst', 'tok', 'ts')
    push_wake(wake)
  end
  return {C_OK, now}
end
local tok = burst
if old[1] then
  -- read as take.lua reads them, whatever a stray write left: a burst
  -- missing or past MAX_BURST, a rate not above 0, tokens of -inf or NaN
  local orate, oburst = tonumber(old[1]), math.min(MAX_BURST, tonumber(old[2]) or 1)
  if not (orate and orate > 0) then orate = 0 end
  local otok, ots = tonumber(old[3]) or oburst, tonumber(old[4]) or now
  if not (otok > -1) then otok = 0 end
  if now > ots then otok = math.min(oburst, otok + (now - ots) * orate / 1000) end
  tok = math.min(burst, otok)
end
redis.call('HSET', ctl, 'rate', ARGV[1], 'burst', fmt(burst), 'tok', string.format('%.17g', tok), 'ts', fmt(now))
push_wake(wake)
return {C_OK, now}
