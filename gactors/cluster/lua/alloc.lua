-- Shared by the allocation-table scripts of sharding (prepended to each of them).
-- KEYS: 1 members (ZSET), 2 info (HASH), 3 version (membership), 4 tombstones, 5 the
-- type's table (HASH: "epoch"; "o:<s>" owner; "m:<s>" "<from>|<to>" while s moves;
-- "a:<s>" ",n1,n2," the regions that acked that move), 6 the type's registered
-- regions (HASH node -> "1" hosting / "0" proxy / "-" stopped: unregistered, its
-- node may still be a member). All under the membership hash tag,
-- so a script reads the membership in the same slot (also on a Redis Cluster).
if redis.replicate_commands then redis.replicate_commands() end
local members, info, mversion, tomb, alloc, regions =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]

local function is_member(n) return redis.call('ZSCORE', members, n) ~= false end

-- Up (not leaving) member whose region of this type hosts: a node a plan may name.
local function can_host(n)
  if redis.call('HGET', regions, n) ~= '1' or not is_member(n) then return false end
  local v = redis.call('HGET', info, n)
  return v ~= false and string.match(v, '^([^|]*)|') == 'up'
end

-- Flip every move that every registered region still a member acked (owner = to).
-- Registered regions of removed nodes are forgotten (node ids are never reused).
local function flips()
  local regs = redis.call('HGETALL', regions)
  local need = {}
  for i = 1, #regs, 2 do
    local n = regs[i]
    if regs[i + 1] == '-' then
      -- Stopped: it acks nothing any more (and is forgotten with its node).
      if redis.call('ZSCORE', tomb, n) then redis.call('HDEL', regions, n) end
    elseif is_member(n) then
      need[#need + 1] = n
    elseif redis.call('ZSCORE', tomb, n) then
      redis.call('HDEL', regions, n)
    end
  end
  local tbl = redis.call('HGETALL', alloc)
  local flipped = false
  for i = 1, #tbl, 2 do
    local f = tbl[i]
    if string.sub(f, 1, 2) == 'm:' then
      local s = string.sub(f, 3)
      local acks = redis.call('HGET', alloc, 'a:' .. s) or ','
      local all = true
      for _, n in ipairs(need) do
        if not string.find(acks, ',' .. n .. ',', 1, true) then all = false; break end
      end
      if all then
        redis.call('HSET', alloc, 'o:' .. s, string.match(tbl[i + 1], '|(.*)$'))
        redis.call('HDEL', alloc, f, 'a:' .. s)
        flipped = true
      end
    end
  end
  if flipped then redis.call('HINCRBY', alloc, 'epoch', 1) end
end

-- {table epoch, membership version, table fields, registered regions, members, info}
local function snapshot()
  return {
    tonumber(redis.call('HGET', alloc, 'epoch') or '0'),
    tonumber(redis.call('GET', mversion) or '0'),
    redis.call('HGETALL', alloc),
    redis.call('HGETALL', regions),
    redis.call('ZRANGE', members, 0, -1),
    redis.call('HGETALL', info),
  }
end
