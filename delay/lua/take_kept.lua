-- take_kept.lua: what take keeps of its reply (reply.lua) and how a
-- re-sent take grows it back. Payloads can be large, so the kept reply
-- holds no records: only the head fields, the fence, the gate and each
-- task's ID and due score, as one "c,now,head,next,parked,fence,gate,id,score,..." string
-- (one format and one concat, where the generic encoding of two values
-- per task costs several times as much). A re-sent take reads the records
-- again and returns the tasks still leased under that fence (a task whose
-- lease expired and went to another delivery meanwhile is left out: this
-- delivery of it has ended).
-- KEYS[4] -> tasks base   KEYS[7] -> lease HASH (take's own KEYS)
-- Returns (take_grow) take's reply as take.lua documents it.
local function take_keep(r)
  if #r < 7 then return nil end -- not take's shape: kept the generic way
  local ids = r[0] -- take.lua's items when it took every one of them
  if not ids then
    local o = 0
    ids = {}
    for i = 8, #r, 3 do
      ids[o + 1] = r[i]
      ids[o + 2] = r[i + 1]
      o = o + 2
    end
  end
  -- r[1], r[2] are numbers, r[3], r[4] score text or '', r[5] the parked
  -- count or {parked, lost}, kept as "p/l", r[6] the fence text (0, a
  -- number, when nothing was due), r[7] the gate ('' or Unix ms text); IDs
  -- are base 36 and scores digits, so a comma never occurs in any of them
  local np = r[5]
  if type(np) == 'table' then np = string.format('%d/%d', np[1], np[2]) end
  local ok, head = pcall(string.format, '%d,%d,%s,%s,%s,%s,%s,', r[1], r[2], r[3], r[4], np, r[6], r[7])
  if not ok then return nil end -- not take's shape: kept the generic way
  return head .. table.concat(ids, ',')
end
local function take_grow(s)
  local c, now, hd, nx, np, fence, gate, rest = string.match(s, '^(%-?%d+),(%d+),(%d*),(%d*),([%d/]+),(%d+),(%d*),(.*)$')
  if not c then return (rp_dec(s, 1)) end
  if fence == '0' then fence = 0 end
  local parked, lost = string.match(np, '^(%d+)/(%d+)$')
  if parked then np = {tonumber(parked), tonumber(lost)} else np = tonumber(np) end
  local out = {tonumber(c), tonumber(now), hd, nx, np, fence, gate}
  local ids, scores = {}, {}
  for id, sc in string.gmatch(rest, '([^,]+),([^,]+)') do
    ids[#ids + 1] = id
    scores[#scores + 1] = sc
  end
  if #ids == 0 then return out end
  local fences = redis.call('HMGET', KEYS[7], unpack(ids))
  local blobs = get_recs(KEYS[4], ids)
  for i = 1, #ids do
    if fences[i] == fence and blobs[i] then
      out[#out + 1] = ids[i]
      out[#out + 1] = scores[i]
      out[#out + 1] = blobs[i]
    end
  end
  return out
end
