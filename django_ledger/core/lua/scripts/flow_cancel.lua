-- flow_cancel.lua: cancel a workflow: every step not yet started (waiting, or a PENDING
-- record) ends as cancelled; claimed steps run on, and what waits on them stays cancelled.
-- KEYS: the standard list (codec.lua). ARGV[1] skew, ARGV[2] workflow id.
-- Returns {now, steps cancelled}, or {now, -1} for a workflow the queue does not hold.
local now = server_now()
local flow = ARGV[2]
local manifest = redis.call('HGET', KEYS.flows, 'm:' .. flow)
if not manifest then return {now, -1} end
redis.call('HSET', KEYS.flows, 'x:' .. flow, exact(now))
local steps = cjson.decode(manifest).steps
local ids = {}
for i, step in ipairs(steps) do ids[i] = flow .. ':' .. step[1] end
local records = flow_hmget(KEYS.records, ids)
local cancelled = 0
local text = 'StepCancelled: the workflow ' .. flow .. ' was cancelled\n'
for k, id in ipairs(ids) do
  if redis.call('HDEL', KEYS.flows, 'n:' .. id) == 1 then
    local spec = cjson.decode(redis.call('HGET', KEYS.flows, 's:' .. id))
    flow_cancel_step(now, id, spec, '', 'the workflow ' .. flow .. ' was cancelled')
    cancelled = cancelled + 1
  elseif records[k] then
    local r = decode(id, records[k])
    if r and r.s == 'P' then
      r.s, r.updated, r.given, r.held = 'F', now, false, false
      redis.call('HSET', KEYS.records, id, encode(id, r))
      redis.call('ZREM', KEYS.ready, id)
      redis.call('ZADD', KEYS.failed, score_of(r), id)
      flow_add_error(now, id, text)
      redis.call('HSET', KEYS.flows, 'c:' .. id, '')
      cancelled = cancelled + 1
    end
  end
end
return {now, cancelled}
