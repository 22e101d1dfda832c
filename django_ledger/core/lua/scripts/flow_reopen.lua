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
local spec = redis.call('HGET', KEYS.flows, 's:' .. id)
if not spec then return 0 end  -- no workflow's step
redis.call('HDEL', KEYS.flows, 'c:' .. id)
if redis.call('HEXISTS', KEYS.flows, 'x:' .. cjson.decode(spec).f) == 1 then return 0 end
local reopened = 0
local work = {id}
while #work > 0 do
  local pid = table.remove(work)
  local deps = redis.call('HGET', KEYS.flows, 'd:' .. pid)
  if deps then
    for _, pair in ipairs(cjson.decode(deps)) do
      local child = pair[1]
      if redis.call('HGET', KEYS.flows, 'c:' .. child) == pid then
        local spec = cjson.decode(redis.call('HGET', KEYS.flows, 's:' .. child))
        local raws = flow_hmget(KEYS.records, spec.p)
        local waits, blocked = 0, false
        for i, parent in ipairs(spec.p) do
          local r = raws[i] and decode(parent, raws[i])
          if not raws[i] then
            if redis.call('HEXISTS', KEYS.flows, 'n:' .. parent) == 1 then waits = waits + 1 end
          elseif not r or r.s == 'P' or r.s == 'C' then
            waits = waits + 1
          elseif r.s ~= 'K' and spec.o ~= 'continue' then
            blocked = true
          end
        end
        if not blocked and waits > 0 then
          -- Its cancelled record and error go; it waits, as it did before, for no record.
          redis.call('HDEL', KEYS.records, child)
          redis.call('HDEL', KEYS.results, child)
          redis.call('HDEL', KEYS.progress, child)
          unindex(child)
          redis.call('HDEL', KEYS.flows, 'c:' .. child)
          redis.call('HSET', KEYS.flows, 'n:' .. child, waits)
          -- It reads the outputs kept for its purged parents again (flow_unwait).
          for _, parent in ipairs(spec.p) do
            if redis.call('HEXISTS', KEYS.flows, 'w:' .. parent) == 1 then
              redis.call('HINCRBY', KEYS.flows, 'w:' .. parent, 1)
            end
          end
          reopened = reopened + 1
          work[#work + 1] = child
        end
      end
    end
  end
end
return reopened
