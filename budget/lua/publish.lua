-- publish.lua: replaces the budget's published definitions (Budget.Publish),
-- which operators' tools read (Open) to know each promotion's caps.
--
-- KEYS[1] -> defs (HASH promotion -> its caps, JSON)
-- ARGV[i] -> promotion, definition, promotion, definition, ...
-- Returns the number of promotions published.
redis.call('DEL', KEYS[1])
-- In chunks: Lua's unpack refuses more than about 8,000 values at once.
for i = 1, #ARGV, 1000 do
  redis.call('HSET', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
return #ARGV / 2
