-- After alloc.lua. ARGV: 1 node. Its region stopped: it acks nothing any more.
if #ARGV ~= 1 then
  return redis.error_reply('ERR alloc_unregister takes 1 argument (node), not ' .. #ARGV)
end
if redis.call('HDEL', regions, ARGV[1]) == 1 then redis.call('HINCRBY', alloc, 'epoch', 1) end
flips()
return snapshot()
