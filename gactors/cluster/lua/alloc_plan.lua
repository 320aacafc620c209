-- After alloc.lua. ARGV: 1 membership version, 2 table epoch (the plan was computed
-- from them: compare-and-set, a stale plan does nothing), 3.. the desired owner of
-- each shard ("" for none). An unowned shard gets its owner at once (nobody sent it
-- anything yet); an owned one whose desired owner differs moves (from, to); a moving
-- one gets its target updated (never back to its from: the move completes first).
-- A plan for another number of shards than the table's is refused (error
-- GACTORS_SHARD_COUNT <n>, see alloc_register.lua).
if #ARGV < 3 then
  return redis.error_reply('ERR alloc_plan takes a version, an epoch and an owner per shard, not ' .. #ARGV .. ' arguments')
end
local count = redis.call('HGET', alloc, 'n')
if count and tonumber(count) ~= #ARGV - 2 then
  return redis.error_reply('GACTORS_SHARD_COUNT ' .. count)
end
if tonumber(redis.call('GET', mversion) or '0') ~= tonumber(ARGV[1])
  or tonumber(redis.call('HGET', alloc, 'epoch') or '0') ~= tonumber(ARGV[2]) then
  flips()
  return snapshot()
end
local changed = false
for i = 3, #ARGV do
  local s = tostring(i - 3)
  local d = ARGV[i]
  if d ~= '' and can_host(d) then
    local owner = redis.call('HGET', alloc, 'o:' .. s)
    local mv = redis.call('HGET', alloc, 'm:' .. s)
    if not owner then
      redis.call('HSET', alloc, 'o:' .. s, d)
      changed = true
    elseif mv then
      local from, to = string.match(mv, '^([^|]*)|(.*)$')
      if d ~= from and d ~= to then
        redis.call('HSET', alloc, 'm:' .. s, from .. '|' .. d)
        changed = true
      end
    elseif owner ~= d then
      redis.call('HSET', alloc, 'm:' .. s, owner .. '|' .. d, 'a:' .. s, ',')
      changed = true
    end
  end
end
if changed then redis.call('HINCRBY', alloc, 'epoch', 1) end
flips()
return snapshot()
