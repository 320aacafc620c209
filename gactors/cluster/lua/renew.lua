-- Leases. KEYS: 1 lease. ARGV: 1 owner, 2 token, 3 ttl ms. Returns 1 if renewed.
local cur = redis.call('HMGET', KEYS[1], 'owner', 'token')
if cur[1] == ARGV[1] and cur[2] == ARGV[2] then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 1
end
return 0
