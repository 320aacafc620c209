-- KEYS: 1 a shard's hand-over stream, 2 the tokens of the appends it took.
-- ARGV: 1 this append's token (unique per append), then pairs (serializer id,
-- payload), in order. An append whose token was seen already is not appended again:
-- a retry after a lost reply must not duplicate its messages. Returns how many
-- messages were appended (0 for a repeat).
if #ARGV < 1 or #ARGV % 2 ~= 1 then
  return redis.error_reply('ERR alloc_stream_add takes a token, then (serializer id, payload) pairs, not ' .. #ARGV .. ' arguments')
end
if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then return 0 end
-- The tokens only have to outlive the retries of an append (seconds).
redis.call('PEXPIRE', KEYS[2], 600000)
for i = 2, #ARGV - 1, 2 do
  redis.call('XADD', KEYS[1], '*', 'i', ARGV[i], 'd', ARGV[i + 1])
end
return (#ARGV - 1) / 2
