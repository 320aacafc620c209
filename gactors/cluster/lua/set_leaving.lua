-- After membership.lua. ARGV: 1 node. Returns 1 if it was a member.
local v = redis.call('HGET', info, ARGV[1])
if not v then return 0 end
local status, rest = string.match(v, '^([^|]*)|(.*)$')
if status == 'leaving' then return 1 end
redis.call('HSET', info, ARGV[1], 'leaving|' .. rest)
redis.call('INCR', version)
return 1
