-- now.lua: the server clock of the queue's own node, and optionally one record's bytes.
-- KEYS: the standard list (codec.lua); only KEYS.records is read. Run with the queue's keys so
-- that, on a cluster, the clock read is the one of the master that runs every other script
-- of this queue (a bare TIME goes to whichever node the client picks).
-- ARGV[1] skew, ARGV[2] (optional) a request id.
-- Returns {now} without ARGV[2]; {now, that record's bytes or nil} with it.
local now = server_now()
if #ARGV < 2 then return {now} end
return {now, redis.call('HGET', KEYS.records, ARGV[2])}
