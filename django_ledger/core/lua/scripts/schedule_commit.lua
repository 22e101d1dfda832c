-- schedule_commit.lua: commit one scheduler tick's decision for one schedule, once.
-- KEYS.state the scheduler's state hash ({namespace}:schedules).
-- KEYS.defs  the stored schedules' hash ({namespace}:schedule-defs).
-- ARGV[1]  the schedule key.
-- ARGV[2]  the "through" second the deciding node read ("" when it read none).
-- ARGV[3]  the new "through" second.
-- ARGV[4]  the pending entry of each admitted fire (JSON: node, deadline).
-- ARGV[5]  the stored schedules' stamp the decision was made with ("": a settings schedule).
-- ARGV[6..] the epochs of the fires to admit.
-- Returns 1 if the decision is now the schedule's, 0 if another node's came first
-- (its "through" is no longer what this node read), or the stored schedules changed
-- since the node read them; then nothing was written.
local through_field = 'through ' .. ARGV[1]
local current = redis.call('HGET', KEYS.state, through_field)
-- The compare-and-set: a decision is made from one reading of "through", and only
-- the first node to commit from that reading gets to hold its fires pending.
if (current or '') ~= ARGV[2] then
  return 0
end
-- A stored schedule edited since the node read it: its decision used the old timing,
-- which must not fire past the edit (the edit decided what the old timing owed).
if ARGV[5] ~= '' and (redis.call('HGET', KEYS.defs, 'stamp') or '0') ~= ARGV[5] then
  return 0
end
-- Pending entries and "through" move together: a node that dies right after this
-- call leaves its fires pending, for the next tick of any node to finish.
for i = 6, #ARGV do
  redis.call('HSET', KEYS.state, 'pending ' .. ARGV[1] .. ' ' .. ARGV[i], ARGV[4])
end
redis.call('HSET', KEYS.state, through_field, ARGV[3])
return 1
