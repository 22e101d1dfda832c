-- quarantine.lua: the reference's QUARANTINE: move corrupt bytes aside if they are
-- still exactly the ones observed. The id stays in records, so its identity is
-- remembered (admission answers CONFLICT 'quarantined') until an operator acts.
-- KEYS: the standard list (codec.lua).
-- ARGV[1] skew, ARGV[2] id, ARGV[3] observed bytes.
-- Returns 0 stale, 1 already quarantined, 2 quarantined now.
local id = ARGV[2]
local raw = redis.call('HGET', KEYS.records, id)
if raw ~= ARGV[3] then return 0 end
unindex(id)
if redis.call('HGET', KEYS.quarantine, id) == raw then return 1 end
redis.call('HSET', KEYS.quarantine, id, raw)
return 2
