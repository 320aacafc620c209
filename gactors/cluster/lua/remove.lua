-- After membership.lua. ARGV: 1 node, 2 reason, 3 tombstone keep ms, 4 tombstone max
-- count. Returns 1 if this call removed it.
if not redis.call('ZSCORE', members, ARGV[1]) then return 0 end
remove(ARGV[1], ARGV[2])
trim_tombstones(tonumber(ARGV[3]), tonumber(ARGV[4]))
return 1
