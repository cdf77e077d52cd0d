-- lib.lua: the functions every budget script shares. The library prepends
-- this file to each script body (scripts.go), so a script is lib.lua
-- followed by its own file. Counter and record keys are derived from the
-- base name KEYS[1] (<prefix>:{b:<name>}:), which itself never exists:
-- every suffix follows the hash tag, so a derived key is on the slot of
-- the declared base name.
--
-- KEYS[i] -> (none: library)
-- ARGV[i] -> (none: library)
-- Returns (none: library)

-- now_ms is Redis TIME in milliseconds: the one clock of every cap,
-- period and hold.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- wrong_type is Redis's WRONGTYPE error for the first key of kt (key,
-- type, key, type, ...) that exists with another type, nil if none: a
-- script that writes such a key after others checks it before it writes
-- anything, so a key a foreign writer replaced fails it whole instead of
-- between its writes.
local function wrong_type(kt)
  for i = 1, #kt, 2 do
    local ty = redis.call('TYPE', kt[i]).ok
    if ty ~= 'none' and ty ~= kt[i + 1] then
      return redis.error_reply('WRONGTYPE ' .. kt[i] .. ' holds a ' .. ty .. ', not a ' .. kt[i + 1])
    end
  end
  return nil
end

-- live is the budget's epoch if its state is whole: nil when the epoch key
-- is gone (Redis lost its data, or the budget was never built) or a
-- rebuild is under way ("rb:<token>").
local function live(epoch)
  local ep = redis.call('GET', epoch)
  if not ep or string.sub(ep, 1, 3) == 'rb:' then
    return nil
  end
  return ep
end

-- undo gives back a record's deltas d ("suffix\tfield\tdelta\n" each).
-- A counter field that is gone (a rebuild dropped it, its period key
-- expired) is left gone: never made negative. A field back at 0 is
-- deleted, so a customer with nothing held or redeemed costs nothing.
local function undo(base, d)
  if not d then
    return
  end
  for suffix, field, delta in string.gmatch(d, '([^\t\n]*)\t([^\t\n]*)\t(%d+)\n') do
    local k = base .. suffix
    if redis.call('HEXISTS', k, field) == 1 then
      if redis.call('HINCRBY', k, field, '-' .. delta) <= 0 then
        redis.call('HDEL', k, field)
      end
    end
  end
end

-- purge releases every hold whose time has passed (expiry <= now) before
-- anything is counted, so a late or lost Release never holds a cap: the
-- record becomes 'x' (expired), kept ttl ms for idempotent replies, and,
-- when report is '1', the order is filed in unrep until its report is
-- taken (Expire) or sent again (Sweep).
local function purge(base, holds, unrep, now, report, ttl)
  local due = redis.call('ZRANGEBYSCORE', holds, '-inf', now)
  for _, order in ipairs(due) do
    local rk = base .. 'o:' .. order
    local r = redis.call('HMGET', rk, 'st', 'd', 'exp')
    if r[1] == 'h' then
      undo(base, r[2])
      redis.call('HSET', rk, 'st', 'x')
      redis.call('PEXPIRE', rk, ttl)
      if report == '1' then
        redis.call('ZADD', unrep, r[3], order)
      end
    end
  end
  if #due > 0 then
    redis.call('ZREMRANGEBYSCORE', holds, '-inf', now)
  end
end

-- caps reads the cap list of a (ARGV, or a request's caps split at tabs)
-- from index i: n caps, each
-- field, delta, limit, ncand, then ncand x (suffix, start ms, end ms). It
-- picks, per cap, the candidate period holding now; nil, if none does
-- (the client's clock is off by more than a period: it asks again with
-- Redis TIME). Non-period caps send one candidate covering all time. A
-- cap is {field, delta (string), d (its
-- number), limit, suffix, ends, id (suffix, tab, field: the counter)},
-- made whole at once: a table filled key by key grows several times.
local function caps(now, a, i)
  local n = tonumber(a[i])
  i = i + 1
  local out = {}
  local skew = false
  for c = 1, n do
    local delta = a[i + 1]
    local cap = {field = a[i], delta = delta, d = tonumber(delta), limit = tonumber(a[i + 2]),
      suffix = false, ends = false, id = false}
    local ncand = tonumber(a[i + 3])
    i = i + 4
    for j = 0, ncand - 1 do
      local s, e = tonumber(a[i + 3 * j + 1]), tonumber(a[i + 3 * j + 2])
      if s <= now and now < e then
        cap.suffix, cap.ends = a[i + 3 * j], e
      end
    end
    if cap.suffix then
      cap.id = cap.suffix .. '\t' .. cap.field
    else
      skew = true
    end
    i = i + 3 * ncand
    out[c] = cap
  end
  if skew then
    return nil
  end
  return out
end

-- used is a cap's counter now (0 when absent). memo, when given, keeps
-- the counters one script read or wrote (key suffix, tab, field ->
-- value): a batch reads each once.
local function used(base, cap, memo)
  local id = cap.id
  if memo and memo[id] then
    return memo[id]
  end
  local u = tonumber(redis.call('HGET', base .. cap.suffix, cap.field) or '0')
  if memo then
    memo[id] = u
  end
  return u
end

-- over is the index of the first cap the deltas would pass, and its
-- counter; nil when every cap allows them. delta > limit - used compares
-- without rounding (each side is an integer below 2^53).
local function over(base, list, memo)
  for c, cap in ipairs(list) do
    local d = cap.d
    if d > 0 then
      local u = used(base, cap, memo)
      if d > cap.limit - u then
        return c, u
      end
    end
  end
  return nil
end

-- intact is false when a counter a cap reads was made and is gone while
-- the epoch stayed: an eviction (maxmemory) or a partial loss, which
-- would otherwise read as 0 and grant past the cap. Every counter key
-- holds the field '_' from its creation, so one given back to nothing
-- still exists; keyset lists every counter key made and holds '' while
-- it is whole (Rebuild files it). A period key that expired on time is
-- of a period over, which no cap reads. whole, when given, keeps what
-- one script found whole (keyset '' -> true, each counter suffix ->
-- true): nothing a script does deletes a counter key, so a batch checks
-- each once.
local function intact(base, keyset, list, whole)
  whole = whole or {}
  if not whole[''] then
    if redis.call('SISMEMBER', keyset, '') == 0 then
      return false
    end
    whole[''] = true
  end
  for _, cap in ipairs(list) do
    if not whole[cap.suffix] then
      if redis.call('EXISTS', base .. cap.suffix) == 0 and redis.call('SISMEMBER', keyset, cap.suffix) == 1 then
        return false
      end
      whole[cap.suffix] = true
    end
  end
  return true
end

-- apply counts the deltas in pend (counter id -> {suffix, field, sum,
-- ends}, and pend.ids in order) for commit to add, updates memo (see
-- used) and returns the record's d. Within one script nothing reads a
-- counter but through memo, so the adds wait for commit: one HINCRBY a
-- counter a script.
local function apply(base, list, memo, pend)
  local d = ''
  for _, cap in ipairs(list) do
    local delta = cap.d
    if delta ~= 0 then
      local id = cap.id
      memo[id] = used(base, cap, memo) + delta
      local a = pend[id]
      if a then
        a.sum = a.sum + delta
      else
        pend[id] = {suffix = cap.suffix, field = cap.field, sum = delta, ends = cap.ends}
        pend.ids[#pend.ids + 1] = id
      end
      d = d .. id .. '\t' .. cap.delta .. '\n'
    end
  end
  return d
end

-- commit adds what apply counted, sets a period key's expiry (its end
-- plus keep ms, past the longest hold that can count in it), files every
-- counter key in keyset (which Rebuild clears) and anchors it (field '_',
-- see intact). Sums stay below 2^53 (each add was checked against a
-- limit), so '%.0f' writes them exactly.
local function commit(base, keyset, keep, pend)
  for _, id in ipairs(pend.ids) do
    local a = pend[id]
    local k = base .. a.suffix
    if redis.call('HINCRBY', k, a.field, string.format('%.0f', a.sum)) == a.sum then
      redis.call('SADD', keyset, a.suffix)
      redis.call('HSETNX', k, '_', '1')
      if a.ends < 9007199254740992 then
        redis.call('PEXPIREAT', k, a.ends + keep)
      end
    end
  end
end

-- taken takes an expired order's report from unrep: 1 when this call
-- took it, also when go-redis sends the same call (token) again after a
-- cut reply (the record keeps the token of the call that took it), else 0.
local function taken(unrep, rk, order, token)
  if redis.call('ZREM', unrep, order) == 1 then
    redis.call('HSET', rk, 'rt', token)
    return 1
  end
  if token ~= '' and redis.call('HGET', rk, 'rt') == token then
    return 1
  end
  return 0
end

-- logged appends a confirmation to the log stream: what a ledger is
-- written from.
local function logged(log, max, order, now, req, ep)
  redis.call('XADD', log, 'MAXLEN', '~', max, '*', 'ev', 'confirm', 'order', order,
    'at', now, 'req', req, 'epoch', ep)
end
