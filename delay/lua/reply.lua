-- reply.lua: the kept reply of a mutating script. A call whose reply was
-- lost is sent again (go-redis retries, the Worker's own re-sends) with the
-- same KEYS and ARGV; it must not run a second time. go generate wraps
-- each mutating body into rp_body and ends the script with rp_run (see
-- Once in internal/luacompose), so the first run stores its reply under
-- the call's request key and a re-run returns that reply without running
-- the body.
-- KEYS[#KEYS] -> the call's reply name <prefix>:{q:<name>}:rp:<nonce>:<bucket>:<slot>;
--                removed from KEYS before the body runs. The reply is kept
--                in the HASH named by all before the last ':' (same hash
--                tag, so the same slot), field <slot>: one small hash per
--                64 calls of a Queue costs a few tens of bytes a reply,
--                where a key of its own cost about 150
--                (TestMemoryPerKeptReply).
-- ARGV[#ARGV] -> how long the reply is kept, ms (its hash's time in the
--                reply index is moved to Redis TIME + this at every reply
--                it keeps, rp_file); removed from ARGV likewise
-- Returns the body's reply, or the kept one.
-- Error replies (error tables, script errors) are never kept: a re-run
-- runs the body again.
--
-- rp_enc appends the exact encoding of a reply value to e: '*n:' then n
-- elements for an array (Redis stops at the first nil, so does this),
-- ':<int>;' for a number (Redis truncates it to an integer; '%d' does the
-- same and, unlike tostring's %.14g, stays exact up to 2^53), '$len:'
-- then the bytes for a string, ':1;' for true, '_' for false and nil.
-- The pieces become one string.format per 500 values (e.f the format,
-- e.a its arguments): a format call per value, or Lua's own number to
-- text, cost several times as much. '%s' copies a string whole unless it
-- is shorter than 100 bytes and holds a zero byte (Lua 5.1 formats those
-- with sprintf): such a string goes to e.out as it is.
local function rp_flush(e)
  if #e.f > 0 then
    e.out[#e.out + 1] = string.format(table.concat(e.f), unpack(e.a))
    e.f, e.a = {}, {}
  end
end
local function rp_enc(v, e)
  local t = type(v)
  local f, a = e.f, e.a
  if t == 'table' then
    local n = 0
    while v[n + 1] ~= nil do n = n + 1 end
    f[#f + 1] = '*%d:'
    a[#a + 1] = n
    for i = 1, n do
      local x = v[i]
      local tx = type(x)
      if tx == 'number' then
        f[#f + 1] = ':%d;'
        a[#a + 1] = x
      elseif tx == 'string' and (#x >= 100 or not string.find(x, '\0', 1, true)) then
        f[#f + 1] = '$%d:%s'
        a[#a + 1] = #x
        a[#a + 1] = x
      else
        rp_enc(x, e)
        f, a = e.f, e.a
      end
      if #a >= 500 then
        rp_flush(e)
        f, a = e.f, e.a
      end
    end
  elseif t == 'number' then
    f[#f + 1] = ':%d;'
    a[#a + 1] = v
  elseif t == 'string' then
    f[#f + 1] = '$%d:'
    a[#a + 1] = #v
    rp_flush(e)
    e.out[#e.out + 1] = v
  elseif v == true then
    f[#f + 1] = ':1;'
  else
    f[#f + 1] = '_'
  end
end
-- rp_dec reads the value rp_enc wrote at position p of s and returns it
-- with the position after it (false for nil, which Redis replies as nil).
local function rp_dec(s, p)
  local c = string.byte(s, p)
  if c == 42 then -- '*'
    local e = string.find(s, ':', p, true)
    local n, r = tonumber(string.sub(s, p + 1, e - 1)), {}
    p = e + 1
    for i = 1, n do r[i], p = rp_dec(s, p) end
    return r, p
  elseif c == 58 then -- ':'
    local e = string.find(s, ';', p, true)
    return tonumber(string.sub(s, p + 1, e - 1)), e + 1
  elseif c == 36 then -- '$'
    local e = string.find(s, ':', p, true)
    local n = tonumber(string.sub(s, p + 1, e - 1))
    return string.sub(s, e + 1, e + n), e + n + 1
  end
  return false, p + 1
end
-- rp_concat is table.concat(out) in runs of 1000: miniredis's Lua puts
-- every element of one concat on its registry (about 5k slots).
local function rp_concat(out)
  local n = #out
  if n <= 1000 then return table.concat(out) end
  local runs = {}
  for i = 1, n, 1000 do runs[#runs + 1] = table.concat(out, '', i, math.min(i + 999, n)) end
  return table.concat(runs)
end
-- rp_codes keeps a reply of small integer codes (ack, ack_done, release:
-- a 0..10 code per lease) as '#' and one byte per code: one C call for
-- the lot, where rp_enc calls type() on every value, and a C call costs
-- about half a microsecond in Redis 7.0's Lua. string.char refuses a value
-- outside 0..255 (then rp_enc keeps the reply); it would take a numeric
-- string for its number, and these scripts reply with numbers only.
local function rp_codes(r)
  local ok, s = pcall(string.char, unpack(r))
  if ok then return '#' .. s end
  return nil
end
local function rp_uncodes(s)
  if string.byte(s, 1) == 35 then return {string.byte(s, 2, -1)} end
  return (rp_dec(s, 1))
end
-- rp_ints keeps a reply of integers (enqueue_batch when every job made a
-- task: now, the first ID and a score per job) as '+' and ':<int>;' each,
-- a score as its difference from the one before: a batch's jobs are
-- mostly due together, so a score takes a few digits, not 16 (about 17 B
-- a task less while the reply is kept; TestMemoryPerPart). A reply
-- holding a table (a duplicate, a refused job) fails the arithmetic or
-- the format, and rp_enc keeps it. One pcall and one string.format,
-- numbers only, as above; a type() check per element cost 1% of a
-- batched enqueue.
local function rp_ints(r)
  local ok, s = pcall(function()
    local d, prev = {r[1], r[2]}, 0
    for i = 3, #r do
      d[i] = r[i] - prev
      prev = r[i]
    end
    return string.format(string.rep(':%d;', #d), unpack(d))
  end)
  -- miniredis's Lua formats a table under %d ("&{...}") instead of
  -- failing; a plain find costs next to nothing, a pattern scan did
  if ok and not string.find(s, '{', 1, true) then return '+' .. s end
  return nil
end
-- rp_unints reads what rp_ints kept, and the '=' form of an older version
-- (every integer whole) that a re-sent call may still find.
local function rp_unints(s)
  local c = string.byte(s, 1)
  if c ~= 43 and c ~= 61 then return (rp_dec(s, 1)) end -- '+', '='
  local out, n = {}, 0
  for d in string.gmatch(s, ':(%-?%d+);') do
    n = n + 1
    out[n] = tonumber(d)
  end
  if c == 43 then
    for i = 4, n do out[i] = out[i] + out[i - 1] end
  end
  return out
end
-- rp_file files a reply hash in the queue's reply index, the ZSET
-- <prefix>:{q:<name>}:rp:idx (hash -> Redis TIME ms + ttl of its latest
-- reply), and when the hash is new there, deletes up to RP_SWEEP hashes
-- whose time has passed. The hashes carry no TTL, so no volatile-*
-- eviction policy can take a reply before its call's last re-send; a
-- call files at most one new hash, so sweeping two at each new one
-- keeps up with any number of Queues, short-lived ones included.
local function rp_file(key, ttl)
  local RP_SWEEP = 2
  local t = redis.call('TIME')
  local now = t[1] * 1000 + math.floor(t[2] / 1000)
  local idx = string.sub(key, 1, string.find(key, '}', 1, true)) .. ':rp:idx'
  if redis.call('ZADD', idx, now + ttl, key) == 0 then return end
  local old = redis.call('ZRANGEBYSCORE', idx, '-inf', now, 'LIMIT', 0, RP_SWEEP)
  if #old > 0 then
    redis.call('DEL', unpack(old))
    redis.call('ZREM', idx, unpack(old))
  end
end
-- rp_run runs body once per reply key. keep (optional) returns what is
-- stored of the reply: a string kept as it is, or a table (or nil: the
-- reply itself) kept through rp_enc; grow turns the stored string back
-- into the reply.
local function rp_run(body, keep, grow)
  local key = table.remove(KEYS)
  local ttl = table.remove(ARGV)
  local cut = string.find(key, ':[^:}]*$') -- after the tag: the name has ':rp:'
  local field = string.sub(key, cut + 1)
  key = string.sub(key, 1, cut - 1)
  local kept = redis.call('HGET', key, field)
  if kept then
    if grow then return grow(kept) end
    return (rp_dec(kept, 1))
  end
  local r = body()
  if type(r) == 'table' and (r.err or r.ok) then return r end
  local s = keep and keep(r)
  if type(s) ~= 'string' then
    local e = {f = {}, a = {}, out = {}}
    rp_enc(s or r, e)
    rp_flush(e)
    s = rp_concat(e.out)
  end
  redis.call('HSET', key, field, s)
  rp_file(key, ttl)
  return r
end
