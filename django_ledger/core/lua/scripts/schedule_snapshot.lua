-- schedule_snapshot.lua: the server clock of the state's own node, and the state itself.
-- KEYS.state the scheduler's state hash ({namespace}:schedules).
-- KEYS.defs  the stored schedules' hash ({namespace}:schedule-defs).
-- ARGV[1]  "state" to read the whole hash too; anything else reads the clock alone.
-- Returns {seconds, microseconds} or {seconds, microseconds, {field, value, ...}, stamp}.
-- A script, not a pipeline: on a cluster it runs on the master holding KEYS.state, so every
-- tick reads the clock of the one node all schedulers write to (a bare TIME would go to
-- whichever node the client picks), and the clock and the state are one reading. The
-- stored schedules' stamp comes with it, so a node reloads them only when it moved.
local now = redis.call('TIME')
if ARGV[1] ~= 'state' then
  return {now[1], now[2]}
end
local stamp = redis.call('HGET', KEYS.defs, 'stamp') or '0'
return {now[1], now[2], redis.call('HGETALL', KEYS.state), stamp}
