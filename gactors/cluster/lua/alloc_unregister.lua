-- After alloc.lua. ARGV: 1 node. Its region stopped: it acks nothing any more.
redis.call('HDEL', regions, ARGV[1])
flips()
return snapshot()
