-- stats.lua: one consistent snapshot of a queue's counters, from its indexes only.
-- KEYS: the standard ten (codec.lua). ARGV[1] skew.
-- Returns {now, pending_due, pending_later, claimed, expired_leases, completed, failed,
-- dead, quarantined, total, gate, oldest_due_at or -1}.
local now = server_now()
local due = redis.call('ZCOUNT', KEYS[2], '-inf', now)
local oldest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
local oldest_at = -1
if oldest[2] then oldest_at = tonumber(oldest[2]) end
return {
  now, due, redis.call('ZCARD', KEYS[2]) - due,
  redis.call('ZCARD', KEYS[3]), redis.call('ZCOUNT', KEYS[3], '-inf', now),
  redis.call('ZCARD', KEYS[6]), redis.call('ZCARD', KEYS[7]), redis.call('ZCARD', KEYS[8]),
  redis.call('HLEN', KEYS[5]), redis.call('HLEN', KEYS[1]), redis.call('EXISTS', KEYS[4]),
  oldest_at,
}
