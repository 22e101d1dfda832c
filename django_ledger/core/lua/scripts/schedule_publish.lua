-- schedule_publish.lua: what one scheduler node runs, kept while the node ticks.
-- KEYS.node the node's document ({namespace}:scheduler:NODE): a string with a TTL.
-- KEYS.nodes the nodes that publish ({namespace}:schedulers): a sorted set, member the
--          node id, score the epoch millisecond its document expires.
-- ARGV[1]  the node id; ARGV[2] its document (JSON); ARGV[3] the TTL in milliseconds.
-- Returns how many nodes publish now, this one included.
-- One script so that a tick costs one command, and the index and the document agree:
-- a node in the index whose document expired is dropped here, by the next publisher.
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('SET', KEYS.node, ARGV[2], 'PX', ttl)
redis.call('ZADD', KEYS.nodes, now_ms + ttl, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS.nodes, '-inf', now_ms)
-- The index outlives every document in it, and goes when no node publishes.
if redis.call('PTTL', KEYS.nodes) < ttl then
  redis.call('PEXPIRE', KEYS.nodes, ttl)
end
return redis.call('ZCARD', KEYS.nodes)
