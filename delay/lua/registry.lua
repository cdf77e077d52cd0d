-- registry.lua: one heartbeat of a pool in the worker registry of one
-- server and key prefix. The pool's ID is claimed with an owner token
-- (random, drawn by each Run): the entry is written only while the ID is
-- free or held by this token, so a second live pool under the same ID is
-- refused instead of overwriting the first one's entry. The live set is
-- scored by Redis TIME, never by a process clock. Not wrapped by once: a
-- re-sent call writes the same entry under the same token again.
-- KEYS[1] -> entry STRING <prefix>:{workers}:w:<id>
-- KEYS[2] -> owner STRING <prefix>:{workers}:o:<id>
-- KEYS[3] -> live ZSET    <prefix>:{workers}:live
-- ARGV[1] -> pool ID   ARGV[2] -> owner token   ARGV[3] -> entry JSON
-- ARGV[4] -> TTL of the entry and of its owner, ms
-- ARGV[5] -> claim not before (Unix ms, Redis TIME; 0: at once): a pool
--            that saw another token hold the ID claims a free ID only
--            from then, so a live holder whose keys a server lost
--            (restart, flush) claims its ID back first
-- Returns {C_OK, now} when the entry was written; {C_DUP, now, beat,
--          holder, pttl} when another token holds the ID (nothing
--          written): beat is the holder's last heartbeat (Unix ms, Redis
--          TIME; '' if unlisted), holder its token and pttl what is left
--          of its owner key; {C_DUP, now, '', '', 0} when the ID is free
--          but ARGV[5] is still ahead (nothing written).
local entry, owner, live = KEYS[1], KEYS[2], KEYS[3]
local now = now_ms()
local holder = redis.call('GET', owner)
if holder and holder ~= ARGV[2] then
  return {C_DUP, now, redis.call('ZSCORE', live, ARGV[1]) or '', holder, redis.call('PTTL', owner)}
end
if not holder and now < tonumber(ARGV[5]) then
  return {C_DUP, now, '', '', 0}
end
redis.call('SET', owner, ARGV[2], 'PX', ARGV[4])
redis.call('SET', entry, ARGV[3], 'PX', ARGV[4])
redis.call('ZADD', live, now, ARGV[1])
return {C_OK, now}
