-- Leases. KEYS: 1 lease. Returns {owner, token, pttl} or false.
local cur = redis.call('HMGET', KEYS[1], 'owner', 'token')
if not cur[1] then return false end
return {cur[1], tonumber(cur[2]), redis.call('PTTL', KEYS[1])}
