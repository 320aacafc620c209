-- After alloc.lua. ARGV: 1 node, 2 "1" hosting / "0" proxy. A new region sent nothing
-- anywhere yet: it counts as having acked the moves under way.
local node = ARGV[1]
redis.call('HSET', regions, node, ARGV[2])
local tbl = redis.call('HGETALL', alloc)
for i = 1, #tbl, 2 do
  local f = tbl[i]
  if string.sub(f, 1, 2) == 'a:' and not string.find(tbl[i + 1], ',' .. node .. ',', 1, true) then
    redis.call('HSET', alloc, f, tbl[i + 1] .. node .. ',')
  end
end
-- Who can host changed: plans computed before are stale.
redis.call('HINCRBY', alloc, 'epoch', 1)
flips()
return snapshot()
