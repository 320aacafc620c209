-- Inboxes. KEYS: 1 inbox. Takes every entry after the group's cursor (never read)
-- and deletes the inbox. Returns false if there is no inbox.
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local last = '0-0'
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  for i = 1, #g - 1, 2 do
    if g[i] == 'last-delivered-id' then last = g[i + 1] end
  end
end
local entries = redis.call('XRANGE', KEYS[1], '(' .. last, '+')
redis.call('DEL', KEYS[1])
return entries
