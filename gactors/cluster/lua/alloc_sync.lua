-- After alloc.lua. ARGV: 1 the table epoch and 2 the membership version of the
-- caller's last snapshot ("" "" for none). Returns 0 when both are unchanged (the
-- reply a region gets every heartbeat, in O(1)): nothing can flip then, since a
-- move's flip waits only for acks (whose script flips) or for a member's removal
-- (which changes the version). Else flips what can flip and returns the snapshot.
if #ARGV ~= 2 then
  return redis.error_reply('ERR alloc_sync takes 2 arguments (epoch, version), not ' .. #ARGV)
end
if ARGV[1] ~= ''
  and tonumber(redis.call('HGET', alloc, 'epoch') or '0') == tonumber(ARGV[1])
  and tonumber(redis.call('GET', mversion) or '0') == tonumber(ARGV[2]) then
  return 0
end
flips()
return snapshot()
