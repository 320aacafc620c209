-- Leases. KEYS: 1 lease. ARGV: 1 owner, 2 token. Returns 1 if released.
local cur = redis.call('HMGET', KEYS[1], 'owner', 'token')
if cur[1] == ARGV[1] and cur[2] == ARGV[2] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
