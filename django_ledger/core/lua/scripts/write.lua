-- write.lua: the generic compare-and-set write the reference path is built on
-- (the reference's WRITE, extended with terminal indexes and an explicit gate rule).
-- KEYS: the standard list (codec.lua).
-- ARGV[1] skew, ARGV[2] id, ARGV[3] expected bytes ('' = must be absent),
-- ARGV[4] new bytes ('' = delete the record), ARGV[5] ready score or '',
-- ARGV[6] lease score or '', ARGV[7] terminal index 'K'/'F'/'D' or '', ARGV[8] its score,
-- ARGV[9] deadline (refuse when now >= it) or '', ARGV[10] not-before (refuse when
-- now < it) or '', ARGV[11] max records (only for inserts) or '',
-- ARGV[12] gate rule: '' none, 'open' (refuse while closed), 'closed' (refuse while open),
-- ARGV[13] max retained: with a terminal index, purge the oldest ended records past it,
-- ARGV[14] a result to store with the new bytes ('' for none).
-- Returns 1 written, 0 refused (bytes changed or time check failed), -1 full, -2 gate,
-- -3 a workflow's waiting step holds the id (workflows.lua: only its release writes it).
-- With no id (ARGV[2] '': ids are never empty) it writes nothing and only trims: the
-- oldest ended records past ARGV[13], looking at most at ARGV[8] entries (the reference
-- path's settlement batch, as settle.lua trims); returns how many records went.
local id = ARGV[2]
if id == '' then return trim_ended(tonumber(ARGV[13]), tonumber(ARGV[8])) end
-- The gate comes first: an import while it is open writes nothing and says so.
local gate = redis.call('EXISTS', KEYS.gate)
if ARGV[12] == 'open' and gate == 1 then return -2 end
if ARGV[12] == 'closed' and gate == 0 then return -2 end
local old = redis.call('HGET', KEYS.records, id)
if ARGV[3] == '' then
  if old then return 0 end
  if redis.call('HEXISTS', KEYS.flows, 'n:' .. id) == 1 then return -3 end
  if ARGV[11] ~= '' and live_count() >= tonumber(ARGV[11]) then return -1 end
elseif old ~= ARGV[3] then
  return 0
end
-- Validate time inside the same atomic step as the ownership compare-and-set.
local now = server_now()
if ARGV[9] ~= '' and now >= tonumber(ARGV[9]) then return 0 end
if ARGV[10] ~= '' and now < tonumber(ARGV[10]) then return 0 end
-- One authoritative write before the derived indexes.
if ARGV[4] == '' then
  forget(id)
else
  redis.call('HSET', KEYS.records, id, ARGV[4])
  if ARGV[14] ~= '' then redis.call('HSET', KEYS.results, id, ARGV[14]) end
end
-- Whatever the record now holds was written whole by this script: any quarantined
-- copy of older bytes is obsolete (this is how an operator restores or discards).
redis.call('HDEL', KEYS.quarantine, id)
unindex(id)
if ARGV[5] ~= '' then
  redis.call('ZADD', KEYS.ready, ARGV[5], id)
  -- PENDING now (admitted, retried, given back): an idle worker wakes to claim it or to
  -- learn when it falls due.
  wake(now)
end
if ARGV[6] ~= '' then redis.call('ZADD', KEYS.leases, ARGV[6], id) end
if ARGV[7] ~= '' then
  redis.call('ZADD', index_of(ARGV[7]), ARGV[8], id)
  if ARGV[13] ~= '' then trim_ended(tonumber(ARGV[13]), 17) end
end
return 1
