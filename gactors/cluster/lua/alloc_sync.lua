-- After alloc.lua. No ARGV. Flips what can flip (a removed region needs no ack) and
-- returns the snapshot.
flips()
return snapshot()
