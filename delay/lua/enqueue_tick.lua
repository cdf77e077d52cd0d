-- enqueue_tick.lua: one tick of a periodic job (package periodic): the
-- one-job enqueue of enqueue.lua, run here as enqueue_body, behind the
-- job's guard, in one script. The guard is the last tick the job handled
-- (enqueued, or skipped by the caller's catch-up policy, or passed while
-- paused); a tick at or before it is refused, so a tick makes at most one
-- task ever, however long after its task ended a lagging process asks
-- again (enqueue.lua's own (key, token) check lasts only as long as the
-- task, or its DoneTTL tombstone).
-- KEYS[1..8] -> as enqueue.lua   KEYS[9] -> the job's state HASH
-- ARGV[1..9] -> as enqueue.lua (business key = the job's name, token =
--               the tick's Unix ms, when = the tick)
-- ARGV[10] -> the tick, Unix ms  ARGV[11] -> the caller's process ID
-- ARGV[12] -> the caller's definition (a digest of its schedule)
-- ARGV[13] -> '1': skip the tick (move the guard, make no task)
-- ARGV[14] -> the tick after this one by the caller's schedule, Unix ms
-- The state hash: last (the guard, Unix ms), enq (the last tick that made
-- a task), next (ARGV[14] of the last tick handled), paused (since, Unix
-- ms), p:<process> = '<expiry Unix ms> <definition>[ <more>]' (a
-- declaration, written from Go; what follows the definition is for
-- operators, not read here), d:<definition> = '<first declared Unix ms>
-- <spec>'.
-- Only a caller whose own declaration is live may move the guard, and
-- only when its definition is the job's winner: of the definitions with
-- a live declaration, the one declared first (ties: the smaller digest).
-- Expired declarations, and definitions no live declaration holds, are
-- deleted here.
-- Returns {outcome, last, now, winner, prev, enqueue reply}: outcome T_RAN (the
-- enqueue ran: its reply, as enqueue.lua's, says what it did; the guard
-- moved only when it made or found the task), T_SKIPPED, T_PAUSED (the
-- guard moved, no task), T_STALE (tick <= last), T_EARLY (tick > Redis
-- TIME), T_UNDECLARED (the caller's declaration is missing, expired or of
-- another definition), T_OTHER (another definition is the winner); last
-- is the guard after the call (0: none), prev the guard before it (so the
-- caller that moved the guard alone can count the ticks it passed over),
-- winner '' when no declaration is live.
local T_RAN, T_SKIPPED, T_PAUSED, T_STALE, T_EARLY, T_UNDECLARED, T_OTHER = 0, 1, 2, 3, 4, 5, 6
local st = KEYS[9]
local tick, proc, def, skip, nxt = tonumber(ARGV[10]), ARGV[11], ARGV[12], ARGV[13] == '1', ARGV[14]
local now = now_ms()

local all = redis.call('HGETALL', st)
local last, paused, mine = 0, false, false
local live, first, gone = {}, {}, {}
for i = 1, #all, 2 do
  local f, v = all[i], all[i + 1]
  local p = string.match(f, '^p:(.*)$')
  if p then
    local exp, d = string.match(v, '^(%d+) (%S+)')
    if exp and tonumber(exp) > now then
      live[d] = true
      if p == proc and d == def then mine = true end
    else
      gone[#gone + 1] = f
    end
  elseif string.sub(f, 1, 2) == 'd:' then
    first[string.sub(f, 3)] = tonumber(string.match(v, '^(%d+)')) or 0
  elseif f == 'last' then
    last = tonumber(v) or 0
  elseif f == 'paused' then
    paused = true
  end
end
local winner, wfirst = '', nil
for d, at in pairs(first) do
  if not live[d] then
    gone[#gone + 1] = 'd:' .. d
  elseif wfirst == nil or at < wfirst or (at == wfirst and d < winner) then
    winner, wfirst = d, at
  end
end
if #gone > 0 then redis.call('HDEL', st, unpack(gone)) end

local prev = last
if not mine then return {T_UNDECLARED, last, now, winner, prev} end
if winner ~= def then return {T_OTHER, last, now, winner, prev} end
if tick <= last then return {T_STALE, last, now, winner, prev} end
if tick > now then return {T_EARLY, last, now, winner, prev} end
if paused or skip then
  redis.call('HSET', st, 'last', fmt(tick), 'next', nxt)
  if paused then return {T_PAUSED, tick, now, winner, prev} end
  return {T_SKIPPED, tick, now, winner, prev}
end
local r = enqueue_body()
if r[1] == C_OK or r[1] == C_DUP or r[1] == C_RESTORED then
  redis.call('HSET', st, 'last', fmt(tick), 'enq', fmt(tick), 'next', nxt)
  last = tick
end
return {T_RAN, last, now, winner, prev, r}
