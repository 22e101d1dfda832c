-- flow_reopen.lua: an operator retries step ARGV[2] (a FAILED or DEAD step): its record is
-- put back PENDING and the steps its ending cancelled wait again, transitively, in this one
-- call, so no settlement can come between the two (a retried step that completes at once
-- then releases them as any parent does).
-- A step waits again only if its ending parent cancelled it (its c: names that parent: a
-- step cancelled by cancel_workflow, or by another failed parent, stays cancelled), no
-- other parent of it has failed under its 'cancel' rule, and the workflow has not been
-- cancelled (in a cancelled workflow, a retried step runs alone). It waits for its parents
-- that have not ended (a waiting or live one).
-- KEYS: the standard list (codec.lua). ARGV[1] skew, ARGV[2] request id, then, for the
-- retry itself (absent: only reopen): ARGV[3] the bytes the operator was shown, ARGV[4] the
-- new PENDING bytes, ARGV[5] their ready score.
-- Returns the number of steps that wait again, or -1 when the record is no longer the
-- bytes shown (nothing written).
local id = ARGV[2]
if ARGV[4] then
  -- The compare-and-set of write.lua's retry, with the same writes: record, then index.
  if redis.call('HGET', KEYS.records, id) ~= ARGV[3] then return -1 end
  redis.call('HSET', KEYS.records, id, ARGV[4])
  redis.call('HDEL', KEYS.quarantine, id)
  unindex(id)
  redis.call('ZADD', KEYS.ready, ARGV[5], id)
  wake(server_now())
end
return flow_reopen(id)
