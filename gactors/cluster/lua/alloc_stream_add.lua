-- KEYS: 1 a shard's hand-over stream, 2 the tokens of the appends it took, 3 the type's
-- allocation table (the same hash tag). ARGV: 1 this append's token (unique per
-- append), 2 the node the shard moves away from in the move the append is for, then
-- pairs (serializer id, payload), in order. An append whose token was seen already is
-- not appended again: a retry after a lost reply must not duplicate its messages
-- (returns 0). An append for a move that is over (the shard does not move away from
-- that node any more) is refused (returns -1): the new owner may have taken the stream
-- already, so it would never be read. That happens only to a region that had acked
-- the move and then held messages of a node removed meanwhile (its ack was not needed),
-- found by the model. Else returns how many messages were appended.
if #ARGV < 2 or #ARGV % 2 ~= 0 then
  return redis.error_reply('ERR alloc_stream_add takes a token, a from node, then (serializer id, payload) pairs, not ' .. #ARGV .. ' arguments')
end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return 0 end
local shard = string.match(KEYS[1], ':ho:(%d+)$')
local mv = redis.call('HGET', KEYS[3], 'm:' .. shard)
if not mv or string.match(mv, '^([^|]*)|') ~= ARGV[2] then return -1 end
redis.call('SADD', KEYS[2], ARGV[1])
-- The tokens only have to outlive the retries of an append (seconds).
redis.call('PEXPIRE', KEYS[2], 600000)
for i = 3, #ARGV - 1, 2 do
  redis.call('XADD', KEYS[1], '*', 'i', ARGV[i], 'd', ARGV[i + 1])
end
return (#ARGV - 2) / 2
