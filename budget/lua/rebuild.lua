-- rebuild.lua: sets the counters from outside (a ledger's redemptions),
-- in steps: 'begin' marks the budget rebuilding (every other script
-- answers 'lost'), drops every counter and puts back the holds still live;
-- 'add' adds counts; 'end' makes the budget live under a new epoch.
--
-- KEYS[1] -> base name <prefix>:{b:<name>}: (never exists; derived keys)
-- KEYS[2] -> epoch
-- KEYS[3] -> holds
-- KEYS[4] -> unrep
-- KEYS[5] -> keyset
-- ARGV[1] -> step: 'begin', 'add' or 'end'
-- ARGV[2] -> token of this rebuild
-- ARGV[3] -> record TTL ms
-- ARGV[4] -> report: '1' files expired holds in unrep
-- ARGV[5] -> keep ms (a period key lives this long past its end)
-- ARGV[6] -> step number ('add': 1, 2, ...): a step sent again (go-redis
--   resends a script whose reply was lost) answers 'ok' and does nothing
-- ARGV[7..] -> 'add': n, then n x (suffix, field, count, end ms); a count
--   whose period key would already have expired is skipped; then m and m
--   orders the ledger holds as redeemed: their records become confirmed,
--   and a hold of one stops counting (the ledger's count stands for it)
-- Returns {'ok', now, epoch (Redis TIME ms, after 'end') or ''} or {'busy', now} (another
--   rebuild holds the budget).
local base = KEYS[1]
local now = now_ms()
local cur = redis.call('GET', KEYS[2])
local mine = 'rb:' .. ARGV[2]
-- stepk holds '<token>:<step>' of the last step done, so a step sent
-- again after its reply was lost is not done twice: 'add' counts are
-- increments, and 'end' has already replaced the token it checks.
local stepk = base .. 'rbstep'
local stepid = ARGV[2] .. ':' .. ARGV[1] .. ARGV[6]
if ARGV[1] ~= 'begin' and redis.call('GET', stepk) == stepid then
  return {'ok', now, ARGV[1] == 'end' and cur or ''}
end
-- fresh files a counter key in keyset the first time this rebuild
-- touches it, and empties it then: a key keyset no longer listed (the
-- keyset was evicted) is not dropped by 'begin' and would keep its
-- old counts under the new ones. It anchors the key (see intact).
local function fresh(suffix)
  if redis.call('SADD', KEYS[5], suffix) == 1 then
    redis.call('DEL', base .. suffix)
    redis.call('HSET', base .. suffix, '_', '1')
  end
end
if ARGV[1] == 'begin' then
  -- Holds whose time has passed give back first, so none can give back
  -- later from counters this rebuild sets.
  purge(base, KEYS[3], KEYS[4], now, ARGV[4], ARGV[3])
  for _, s in ipairs(redis.call('SMEMBERS', KEYS[5])) do
    redis.call('DEL', base .. s)
  end
  redis.call('DEL', KEYS[5])
  -- The epoch replaced, kept (under the base, like counters) so 'end'
  -- can give a later one even within the same millisecond.
  if cur and string.sub(cur, 1, 3) ~= 'rb:' then
    redis.call('SET', base .. 'prev', cur)
  end
  -- '' marks keyset whole (see intact in lib.lua).
  redis.call('SADD', KEYS[5], '')
  redis.call('SET', KEYS[2], mine)
  redis.call('DEL', stepk)
  -- The holds still live count again, as they did before.
  for _, order in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. now, '+inf')) do
    local d = redis.call('HGET', base .. 'o:' .. order, 'd') or ''
    for suffix, field, delta in string.gmatch(d, '([^\t\n]*)\t([^\t\n]*)\t(%d+)\n') do
      fresh(suffix)
      redis.call('HINCRBY', base .. suffix, field, delta)
    end
  end
  return {'ok', now, ''}
end
if cur ~= mine then
  return {'busy', now}
end
redis.call('SET', stepk, stepid)
if ARGV[1] == 'add' then
  local n, keep = tonumber(ARGV[7]), tonumber(ARGV[5])
  for j = 0, n - 1 do
    local suffix, field, count, ends = ARGV[8 + 4 * j], ARGV[9 + 4 * j], ARGV[10 + 4 * j], tonumber(ARGV[11 + 4 * j])
    if ends + keep > now then
      local k = base .. suffix
      fresh(suffix)
      redis.call('HINCRBY', k, field, count)
      if ends < 9007199254740992 then
        redis.call('PEXPIREAT', k, ends + keep)
      end
    end
  end
  local i = 8 + 4 * n
  for j = 1, tonumber(ARGV[i] or '0') do
    local order = ARGV[i + j]
    local rk = base .. 'o:' .. order
    local r = redis.call('HMGET', rk, 'st', 'd')
    -- A hold still filed in holds was counted again by 'begin' (nothing
    -- purges while the rebuild runs); the ledger's count replaces it.
    if r[1] == 'h' and redis.call('ZREM', KEYS[3], order) == 1 then
      undo(base, r[2])
    end
    if r[1] == 'h' or r[1] == 'x' or r[1] == 'r' then
      -- A later Confirm answers confirmed and counts nothing again.
      redis.call('HSET', rk, 'st', 'c', 'ct', now)
      redis.call('PEXPIRE', rk, ARGV[3])
      redis.call('ZREM', KEYS[4], order)
    end
  end
  return {'ok', now, ''}
end
-- The epoch is Redis TIME at the end, past the epoch replaced: a rebuilt
-- budget never shows the epoch of the state it replaced.
local ep = string.format('%d', math.max(now, tonumber(redis.call('GET', base .. 'prev') or '0') + 1))
redis.call('SET', KEYS[2], ep)
return {'ok', now, ep}
