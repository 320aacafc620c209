-- KEYS: 1 a shard's hand-over stream. ARGV: pairs (serializer id, payload), in order.
for i = 1, #ARGV - 1, 2 do
  redis.call('XADD', KEYS[1], '*', 'i', ARGV[i], 'd', ARGV[i + 1])
end
return #ARGV / 2
