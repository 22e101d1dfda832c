-- server_time.lua: the server clock of the node that holds KEYS.node.
-- KEYS: node, any key of the node whose clock is wanted (a bare TIME goes to whichever
-- node the client picks; a script runs on the one that holds its keys).
-- Returns {seconds, microseconds}.
local _ = KEYS.node
return redis.call('TIME')
