-- stats.lua: one consistent snapshot of a queue's counters, from its indexes only.
-- KEYS: the standard list (codec.lua). ARGV[1] skew.
-- Returns {now, pending_due, pending_later, claimed, expired_leases, completed, failed,
-- dead, quarantined, total, gate, oldest_due_at or -1}.
-- Pending records are counted band by band (one per priority in use, codec.lua).
local now = server_now()
local due, oldest_at = 0, -1
local low, earliest, after = next_band('-inf')
while low do
  due = due + redis.call('ZCOUNT', K.ready, exact(low), exact(low + now))
  if oldest_at < 0 or earliest < oldest_at then oldest_at = earliest end
  low, earliest, after = next_band(after)
end
return {
  now, due, redis.call('ZCARD', K.ready) - due,
  redis.call('ZCARD', K.leases), redis.call('ZCOUNT', K.leases, '-inf', now),
  redis.call('ZCARD', K.completed), redis.call('ZCARD', K.failed), redis.call('ZCARD', K.dead),
  redis.call('HLEN', K.quarantine), redis.call('HLEN', K.records), redis.call('EXISTS', K.gate),
  oldest_at,
}
