-- Shared by the membership scripts (prepended to each of them). KEYS: 1 members,
-- 2 info, 3 version, 4 epoch, 5 tombstones, 6 reasons. ARGV_VIEW_REMOVED is replaced
-- by the loader (_redis_scripts.py) with the argument that says how many tombstones a
-- view lists. Numbers are formatted with %.0f: Lua's tostring() would write large
-- integers in exponent notation.
if redis.replicate_commands then redis.replicate_commands() end
local members, info, version, epoch, tomb, reasons =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local function num(x) return string.format('%.0f', x) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function view()
  return {
    tonumber(redis.call('GET', version) or '0'),
    redis.call('GET', epoch) or '',
    now,
    redis.call('ZRANGE', members, 0, -1, 'WITHSCORES'),
    redis.call('HGETALL', info),
    redis.call('ZRANGE', tomb, -tonumber(ARGV_VIEW_REMOVED), -1),
  }
end

-- keep_ms / max_count: how long and how many tombstones are kept
local function trim_tombstones(keep_ms, max_count)
  local old = redis.call('ZRANGEBYSCORE', tomb, '-inf', '(' .. num(now - keep_ms))
  local n = redis.call('ZCARD', tomb) - #old
  if n > max_count then
    local extra = redis.call('ZRANGE', tomb, #old, #old + n - max_count - 1)
    for _, x in ipairs(extra) do old[#old + 1] = x end
  end
  for _, x in ipairs(old) do
    redis.call('ZREM', tomb, x)
    redis.call('HDEL', reasons, x)
  end
end

local function remove(node, reason)
  redis.call('ZREM', members, node)
  redis.call('HDEL', info, node)
  redis.call('ZADD', tomb, num(now), node)
  redis.call('HSET', reasons, node, reason)
  redis.call('INCR', version)
end
