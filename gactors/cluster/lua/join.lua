-- After membership.lua. ARGV: 1 node, 2 roles json, 3 epoch candidate, 4 removed-in-view
-- count. Returns {code, view}: 0 joined, 2 has a tombstone, 3 already a member.
local node = ARGV[1]
if redis.call('ZSCORE', tomb, node) then return {2, view()} end
if redis.call('ZSCORE', members, node) then return {3, view()} end
redis.call('SET', epoch, ARGV[3], 'NX')
redis.call('ZADD', members, num(now), node)
redis.call('HSET', info, node, 'up|' .. num(now) .. '|' .. ARGV[2])
redis.call('INCR', version)
return {0, view()}
