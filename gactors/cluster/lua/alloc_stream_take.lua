-- KEYS: 1 a shard's hand-over stream. Returns its entries ([id, [field, value...]])
-- and deletes it, in one step: every entry is taken exactly once.
local entries = redis.call('XRANGE', KEYS[1], '-', '+')
redis.call('DEL', KEYS[1])
return entries
