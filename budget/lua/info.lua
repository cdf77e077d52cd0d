-- info.lua: what an operator reads of a budget (Budget.Info): the
-- counters named, summed per cap, and the deltas of the live holds, holds
-- whose time has passed purged first.
--
-- KEYS[1] -> base name <prefix>:{b:<name>}: (never exists; derived keys)
-- KEYS[2] -> epoch
-- KEYS[3] -> holds
-- KEYS[4] -> unrep
-- KEYS[5] -> keyset (every counter key suffix made; '' while whole)
-- ARGV[1] -> record TTL ms
-- ARGV[2] -> report: '1' files expired holds in unrep
-- ARGV[3] -> the most holds read (the earliest to end)
-- ARGV[4..] -> counter key suffixes
-- Returns {'ok', now, {per suffix: {group, sum, values, most, ...}},
--   {held: {suffix, group, sum, ...}}, {promotion, holds, ...}, live holds,
--   {per suffix: 1 when the counter is lost (see intact), else 0}}
--   or {'lost', now}. A group is a field without its attribute value:
--   'u', 's', 'u@customer'.
local base = KEYS[1]
local now = now_ms()
if not live(KEYS[2]) then
  return {'lost', now}
end
purge(base, KEYS[3], KEYS[4], now, ARGV[2], ARGV[1])
local function group(f)
  return (string.gsub(f, '=.*$', ''))
end
local counters, gone = {}, {}
local whole = redis.call('SISMEMBER', KEYS[5], '') == 1
for i = 4, #ARGV do
  if not whole or (redis.call('EXISTS', base .. ARGV[i]) == 0 and redis.call('SISMEMBER', KEYS[5], ARGV[i]) == 1) then
    gone[#gone + 1] = 1
  else
    gone[#gone + 1] = 0
  end
  local kv = redis.call('HGETALL', base .. ARGV[i])
  local agg, order = {}, {}
  for j = 1, #kv, 2 do
    local g, v = group(kv[j]), tonumber(kv[j + 1])
    local a = agg[g]
    if not a then
      a = {0, 0, 0}
      agg[g] = a
      order[#order + 1] = g
    end
    a[1], a[2] = a[1] + v, a[2] + 1
    if v > a[3] then
      a[3] = v
    end
  end
  local out = {}
  for _, g in ipairs(order) do
    local a = agg[g]
    out[#out + 1] = g
    out[#out + 1] = a[1]
    out[#out + 1] = a[2]
    out[#out + 1] = a[3]
  end
  counters[#counters + 1] = out
end
local held, hkeys, promos, pkeys = {}, {}, {}, {}
for _, o in ipairs(redis.call('ZRANGE', KEYS[3], 0, tonumber(ARGV[3]) - 1)) do
  local d = redis.call('HGET', base .. 'o:' .. o, 'd') or ''
  local seen = {}
  for suffix, f, delta in string.gmatch(d, '([^\t\n]*)\t([^\t\n]*)\t(%d+)\n') do
    local k = suffix .. '\t' .. group(f)
    if not held[k] then
      held[k] = 0
      hkeys[#hkeys + 1] = k
    end
    held[k] = held[k] + tonumber(delta)
    local p = string.match(suffix, '^c:([^:]*)')
    if p and not seen[p] then
      seen[p] = true
      if not promos[p] then
        promos[p] = 0
        pkeys[#pkeys + 1] = p
      end
      promos[p] = promos[p] + 1
    end
  end
end
local hout, pout = {}, {}
for _, k in ipairs(hkeys) do
  local suffix, g = string.match(k, '^([^\t]*)\t(.*)$')
  hout[#hout + 1] = suffix
  hout[#hout + 1] = g
  hout[#hout + 1] = held[k]
end
for _, p in ipairs(pkeys) do
  pout[#pout + 1] = p
  pout[#pout + 1] = promos[p]
end
return {'ok', now, counters, hout, pout, redis.call('ZCARD', KEYS[3]), gone}
