-- KEYS: 1 a shard's hand-over stream. ARGV: the ids of the entries its new owner read
-- (XRANGE) and holds now. Deletes them, and the stream once it is empty. Repeating it
-- (a retry after a lost reply) deletes nothing more: the read is not repeated after a
-- delete, so no entry is delivered twice, and none is deleted before it was read.
if #ARGV > 0 then redis.call('XDEL', KEYS[1], unpack(ARGV)) end
if redis.call('XLEN', KEYS[1]) == 0 then redis.call('DEL', KEYS[1]) end
return #ARGV
