-- publish.lua: replaces the budget's published definitions (Budget.Publish),
-- which operators' tools read (Open) to know each promotion's caps.
--
-- KEYS[1] -> defs (HASH promotion -> its caps, JSON)
-- ARGV[i] -> promotion, definition, promotion, definition, ...
-- Returns the number of promotions published.
redis.call('DEL', KEYS[1])
if #ARGV > 0 then
  redis.call('HSET', KEYS[1], unpack(ARGV))
end
return #ARGV / 2
