-- After alloc.lua. ARGV: 1 node. Its region stopped: it acks nothing any more.
if redis.call('HDEL', regions, ARGV[1]) == 1 then redis.call('HINCRBY', alloc, 'epoch', 1) end
flips()
return snapshot()
