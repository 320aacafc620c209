-- Inboxes. KEYS: 1 inbox. ARGV: 1 max unread entries, 2 batch.
-- Returns 1 sent, 0 gone, -1 full.
if redis.replicate_commands then redis.replicate_commands() end
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('XLEN', KEYS[1]) >= tonumber(ARGV[1]) then return -1 end
redis.call('XADD', KEYS[1], '*', 'd', ARGV[2])
return 1
