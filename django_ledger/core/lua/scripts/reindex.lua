-- reindex.lua: the reference's REPAIR: rebuild one record's indexes if its bytes are
-- still exactly the ones observed, so a stale pass cannot touch a newer claim. The caller
-- has decoded those bytes.
-- KEYS: the standard list (codec.lua).
-- ARGV[1] skew, ARGV[2] id, ARGV[3] observed bytes, ARGV[4] index letter P/C/K/F/D,
-- ARGV[5] score.
-- Returns 0 stale, 1 indexes already right, 2 rebuilt.
local id = ARGV[2]
if redis.call('HGET', KEYS.records, id) ~= ARGV[3] then return 0 end
-- Bytes that decode again are back in service: a quarantined copy of them is obsolete.
local own = index_of(ARGV[4])
local changed = redis.call('HDEL', KEYS.quarantine, id) + redis.call('ZADD', own, 'CH', ARGV[5], id)
for _, k in ipairs({KEYS.ready, KEYS.leases, KEYS.completed, KEYS.failed, KEYS.dead}) do
  if k ~= own then changed = changed + redis.call('ZREM', k, id) end
end
if changed > 0 then return 2 end
return 1
