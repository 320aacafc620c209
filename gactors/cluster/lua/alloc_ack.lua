-- After alloc.lua. ARGV: 1 node, then pairs (shard, from): the region has nothing in
-- flight for the shard any more and wrote what it holds of other regions' messages
-- to the shard's hand-over stream. An ack of a move that is over (another from) is
-- ignored.
if #ARGV < 1 or #ARGV % 2 ~= 1 then
  return redis.error_reply('ERR alloc_ack takes a node, then (shard, from) pairs, not ' .. #ARGV .. ' arguments')
end
local node = ARGV[1]
for i = 2, #ARGV - 1, 2 do
  local s = ARGV[i]
  local mv = redis.call('HGET', alloc, 'm:' .. s)
  if mv and string.match(mv, '^([^|]*)|') == ARGV[i + 1] then
    local acks = redis.call('HGET', alloc, 'a:' .. s) or ','
    if not string.find(acks, ',' .. node .. ',', 1, true) then
      redis.call('HSET', alloc, 'a:' .. s, acks .. node .. ',')
    end
  end
end
flips()
return snapshot()
