-- Leases. KEYS: 1 lease, 2 fence. ARGV: 1 owner, 2 ttl ms. A missing fence counter
-- (first grant, or the store lost its data) is seeded with the server time in
-- microseconds, so tokens keep increasing across a data loss as long as the server
-- clock does. Returns the fencing token, or false if another owner holds the lease.
if redis.replicate_commands then redis.replicate_commands() end
local cur = redis.call('HMGET', KEYS[1], 'owner', 'token')
if cur[1] then
  if cur[1] == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return tonumber(cur[2])
  end
  return false
end
if redis.call('EXISTS', KEYS[2]) == 0 then
  local t = redis.call('TIME')
  redis.call('SET', KEYS[2], t[1] .. string.format('%06d', tonumber(t[2])))
end
local token = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'token', string.format('%.0f', token))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return token
