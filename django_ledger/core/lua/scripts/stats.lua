-- stats.lua: one consistent snapshot of a queue's counters, from its indexes only.
-- KEYS: the standard list (codec.lua). ARGV[1] skew.
-- Returns {now, pending_due, pending_later, claimed, expired_leases, completed, failed,
-- dead, quarantined, total, gate, oldest_due_at or -1}.
-- Pending records are counted band by band (one per priority in use, codec.lua).
local now = server_now()
local due, oldest_at = 0, -1
local low, earliest, after = next_band('-inf')
while low do
  due = due + redis.call('ZCOUNT', KEYS.ready, exact(low), exact(low + now))
  if oldest_at < 0 or earliest < oldest_at then oldest_at = earliest end
  low, earliest, after = next_band(after)
end
return {
  now, due, redis.call('ZCARD', KEYS.ready) - due,
  redis.call('ZCARD', KEYS.leases), redis.call('ZCOUNT', KEYS.leases, '-inf', now),
  redis.call('ZCARD', KEYS.completed), redis.call('ZCARD', KEYS.failed), redis.call('ZCARD', KEYS.dead),
  redis.call('HLEN', KEYS.quarantine), redis.call('HLEN', KEYS.records), redis.call('EXISTS', KEYS.gate),
  oldest_at,
}
