-- After alloc.lua. ARGV: 1 node. Its region stopped: it acks nothing any more. It is
-- marked stopped ("-"), not forgotten: its node may stay a member, and the other
-- regions must neither plan shards to it nor wait for its drain confirmations (found
-- by review: a region stopped on a node that stayed up kept its shards for good).
if #ARGV ~= 1 then
  return redis.error_reply('ERR alloc_unregister takes 1 argument (node), not ' .. #ARGV)
end
local v = redis.call('HGET', regions, ARGV[1])
if v and v ~= '-' then
  redis.call('HSET', regions, ARGV[1], '-')
  redis.call('HINCRBY', alloc, 'epoch', 1)
end
flips()
return snapshot()
