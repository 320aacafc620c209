-- After membership.lua. ARGV: 1 node, 2 down_after_ms, 3 tombstone keep ms, 4 tombstone
-- max count, 5 removed-in-view count. Returns {self_removed 0/1, reaped, view}.
local node = ARGV[1]
local down_after = tonumber(ARGV[2])
if not redis.call('ZSCORE', members, node) then return {1, {}, view()} end
redis.call('ZADD', members, num(now), node)
local stale = redis.call('ZRANGEBYSCORE', members, '-inf', '(' .. num(now - down_after))
if #stale > 0 then
  for _, n in ipairs(stale) do
    local last = tonumber(redis.call('ZSCORE', members, n))
    remove(n, 'downed by ' .. node .. ': no heartbeat for ' .. num(now - last) .. ' ms')
  end
  trim_tombstones(tonumber(ARGV[3]), tonumber(ARGV[4]))
end
return {0, stale, view()}
