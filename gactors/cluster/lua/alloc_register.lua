-- After alloc.lua. ARGV: 1 node, 2 "1" hosting / "0" proxy, 3 the type's number of
-- shards. A new region sent nothing anywhere yet: it counts as having acked the moves
-- under way (a node has one region per type for its life: a restarted region keeps
-- its registration, _region._Kept). The table keeps the number of shards ("n"):
-- another number is refused (error GACTORS_SHARD_COUNT <n>: the nodes would map
-- entity ids to shards differently) while a member's region registered with it, and
-- starts the table anew, hand-over streams included, once none is left (a redeploy
-- with a new number).
if #ARGV ~= 3 then
  return redis.error_reply('ERR alloc_register takes 3 arguments (node, hosting, number of shards), not ' .. #ARGV)
end
local node = ARGV[1]
local n = redis.call('HGET', alloc, 'n')
if n and n ~= ARGV[3] then
  local regs = redis.call('HGETALL', regions)
  for i = 1, #regs, 2 do
    local r = regs[i]
    if r ~= node and regs[i + 1] ~= '-' and is_member(r) then
      -- The refused region stops: marked stopped, as by alloc_unregister.lua, so the
      -- other regions plan no shard to its node (found by review: shards planned to it
      -- before stayed without an owner, their messages held for good).
      if redis.call('HGET', regions, node) ~= '-' then
        redis.call('HSET', regions, node, '-')
        redis.call('HINCRBY', alloc, 'epoch', 1)
      end
      return redis.error_reply('GACTORS_SHARD_COUNT ' .. n)
    end
  end
  local epoch = tonumber(redis.call('HGET', alloc, 'epoch') or '0')
  -- The hand-over streams go too: their messages were put in shards by the old number,
  -- and the new owner of a shard would start their entities where the new number does
  -- not put them (one entity in two places; found by review). Their senders' nodes are
  -- gone. (Keys under the table's hash tag: the same slot.)
  for s = 0, tonumber(n) - 1 do
    redis.call('DEL', alloc .. ':ho:' .. s, alloc .. ':ho:' .. s .. ':tokens')
  end
  redis.call('DEL', alloc, regions)
  redis.call('HSET', alloc, 'epoch', epoch + 1)
end
redis.call('HSET', alloc, 'n', ARGV[3])
redis.call('HSET', regions, node, ARGV[2])
local tbl = redis.call('HGETALL', alloc)
for i = 1, #tbl, 2 do
  local f = tbl[i]
  if string.sub(f, 1, 2) == 'a:' and not string.find(tbl[i + 1], ',' .. node .. ',', 1, true) then
    redis.call('HSET', alloc, f, tbl[i + 1] .. node .. ',')
  end
end
-- Who can host changed: plans computed before are stale.
redis.call('HINCRBY', alloc, 'epoch', 1)
flips()
return snapshot()
