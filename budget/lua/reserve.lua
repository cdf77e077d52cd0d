-- reserve.lua: judges a batch of requests one after another, each on its
-- own: reserves all or none of a request's caps (mode 'r'), or confirms
-- an expired hold again if its caps still allow it (mode 'c'). Expired
-- holds are purged first, once; Redis TIME, the epoch and the keyset are
-- read once; each counter is read once (see used and intact in lib.lua),
-- and each distinct caps string parsed once.
--
-- KEYS[1] -> base name <prefix>:{b:<name>}: (never exists; derived keys)
-- KEYS[2] -> epoch (string: generation, or rb:<token> while rebuilding)
-- KEYS[3] -> holds (ZSET order -> hold expiry ms)
-- KEYS[4] -> unrep (ZSET order -> expiry ms: expired, not yet reported)
-- KEYS[5] -> log (STREAM of confirmations)
-- KEYS[6] -> keyset (SET of counter key suffixes, and '' while whole)
-- ARGV[1] -> record TTL ms (after a record ends)
-- ARGV[2] -> keep ms (a period key lives this long past its end)
-- ARGV[3] -> report: '1' files expired holds in unrep
-- ARGV[4] -> log MAXLEN (approximate)
-- ARGV[5] -> n: the number of requests
-- ARGV[6..] -> n requests, one argument each: order (its record, HASH
--   st, req, exp, d, at, n, ct, rt, is base .. 'o:' .. order); req (the
--   request as the library encodes it: its identity); hold ms; mode ('r'
--   reserve, 'c' confirm an expired hold); call token (a record made with
--   it answers new = 1 again, so a batch go-redis sends again after a
--   cut reply still reports the grants it made), each followed by a tab
--   (none holds one), then its caps, each argument of caps in lib.lua
--   followed by a tab
-- Returns {'lost', now} (no epoch) or {'batch', now, epoch, reply 1,
--   .., reply n}, each reply one of expiry ms (an integer: a new hold,
--   the common case, which the library reads as {'ok', now, epoch, 'h',
--   expiry ms, 1}), {'ok', now, epoch, state, expiry ms, new (1|0)},
--   {'limit', now, cap index (1-based), used}, {'conflict', now, state},
--   {'state', now, state} (mode 'c': the record is no longer expired),
--   {'lost', now} (a counter it reads is gone: see intact), {'skew', now}
--   or {'damaged', now, error} (its record key holds another type: that
--   request alone fails); WRONGTYPE, with nothing written, when holds,
--   unrep or log holds another type.
local base = KEYS[1]
local now = now_ms()
local ep = live(KEYS[2])
if not ep then
  return {'lost', now}
end
-- The writes at the end reach holds, unrep and log after the counters
-- and records: one of another type would stop the script between them,
-- leaving a hold counted and recorded that no purge ever ends.
local bad = wrong_type({KEYS[3], 'zset', KEYS[4], 'zset', KEYS[5], 'stream'})
if bad then
  return bad
end
purge(base, KEYS[3], KEYS[4], now, ARGV[3], ARGV[1])
local keep = tonumber(ARGV[2])
local memo, whole = {}, {}
-- No report is waiting (the common case): no order's to take out.
local unrep = redis.call('EXISTS', KEYS[4]) == 1
-- The writes wait for the end: counters first (commit), then records
-- and holds in request order, so a script stopped in between (it cannot
-- be, short of a key of the wrong type) counts a hold it did not record,
-- never past a cap. recs answers what this batch wrote to a record (the
-- fields HMGET reads below, then what the write needs); writes lists
-- them in order; zadd gathers the holds entries. Times go to Redis as
-- integer strings ('%d'): a Lua number would be written with '%.17g',
-- several times slower.
local pend, recs, writes, zadd = {ids = {}}, {}, {}, {}
local nows = string.format('%d', now)
-- parsed: a request's caps string -> its list (false: skew), parsed once
-- a batch (requests of one cart shape send the same)
local parsed = {}
local function caps_of(s)
  local l = parsed[s]
  if l == nil then
    local a, n = {}, 0
    for f in string.gmatch(s, '([^\t]*)\t') do
      n = n + 1
      a[n] = f
    end
    l = caps(now, a, 1) or false
    parsed[s] = l
  end
  return l
end

-- Each request's fields, split once (one argument a request costs the
-- server less to read than six), and rks, its record key. fresh: none of
-- those existed before this batch (the common case: new orders), read
-- with one EXISTS for the batch instead of one HMGET a request (a
-- redis.call costs more than the Lua around it); then a record this
-- batch did not write reads as HMGET reads a missing key.
local n = tonumber(ARGV[5])
local orders, reqs, holds, modes, tokens, capss, rks = {}, {}, {}, {}, {}, {}, {}
for j = 1, n do
  local o, q, h, m, t, c = string.match(ARGV[5 + j], '^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$')
  orders[j], reqs[j], holds[j], modes[j], tokens[j], capss[j] = o, q, h, m, t, c
  rks[j] = base .. 'o:' .. o
end
local fresh = redis.call('EXISTS', unpack(rks)) == 0
local none = {false, false, false, false, false}

-- one judges request j and returns its reply.
local function one(j)
  local order, req, mode, token = orders[j], reqs[j], modes[j], tokens[j]
  local rk = rks[j]
  local list = caps_of(capss[j])
  local r = recs[rk]
  if not r and fresh then
    r = none
  elseif not r then
    -- pcall: a record key of another type (a foreign writer's) fails
    -- its own request, not the batch.
    r = redis.pcall('HMGET', rk, 'st', 'req', 'exp', 'n', 'rt')
    if r.err then
      return {'damaged', now, r.err}
    end
  end
  local st = r[1]
  if mode == 'r' then
    if st == 'h' or st == 'c' then
      if r[2] ~= req then
        return {'conflict', now, st}
      end
      local again = 0
      if st == 'h' and r[4] == token then
        again = 1 -- the same call sent again: its grant
      end
      return {'ok', now, ep, st, tonumber(r[3]), again}
    end
  elseif st ~= 'x' or r[2] ~= req then
    return {'state', now, st or ''}
  end
  if not list then
    return {'skew', now}
  end
  if not intact(base, KEYS[6], list, whole) then
    return {'lost', now}
  end
  local c, u = over(base, list, memo)
  if c then
    return {'limit', now, c, u}
  end
  local d = apply(base, list, memo, pend)
  if mode == 'r' then
    local exp = now + tonumber(holds[j])
    local exps = string.format('%d', exp)
    -- del: an ended record, or one Release or Expire left
    recs[rk] = {'h', req, exps, token, false, 'r', rk, order, d, st or r[5]}
    writes[#writes + 1] = recs[rk]
    zadd[#zadd + 1] = exps
    zadd[#zadd + 1] = order
    return exp
  end
  recs[rk] = {'c', req, r[3], r[4], r[5], 'c', rk, order, d}
  writes[#writes + 1] = recs[rk]
  return {'ok', now, ep, 'c', tonumber(r[3]), 1}
end

local out = {'batch', now, ep}
for j = 1, n do
  out[3 + j] = one(j)
end
commit(base, KEYS[6], keep, pend)
for _, w in ipairs(writes) do
  -- w: the record as HMGET reads it, then mode, key, order, d and (mode
  -- 'r') whether an older record is there to delete
  local rk, order = w[7], w[8]
  if w[6] == 'r' then
    if w[10] then
      redis.call('DEL', rk)
    end
    redis.call('HSET', rk, 'st', 'h', 'req', w[2], 'exp', w[3], 'd', w[9], 'at', nows, 'n', w[4])
  else
    redis.call('HSET', rk, 'st', 'c', 'd', w[9], 'ct', nows)
    redis.call('PEXPIRE', rk, ARGV[1])
    logged(KEYS[5], ARGV[4], order, now, w[2], ep)
  end
  -- An order reserved or confirmed again after its hold ended has
  -- nothing left to report (its report outlives its record: no record
  -- does not mean none).
  if unrep then
    redis.call('ZREM', KEYS[4], order)
  end
end
if #zadd > 0 then
  redis.call('ZADD', KEYS[3], unpack(zadd))
end
return out
