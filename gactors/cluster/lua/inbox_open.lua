-- Inboxes. KEYS: 1 inbox (each inbox script touches that one key: one hash slot).
-- ARGV: 1 ttl ms. Creates the stream with its group (the cursor starts before the
-- first entry) unless it exists, and sets its expiry.
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('XGROUP', 'CREATE', KEYS[1], 'g', '0', 'MKSTREAM')
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
