-- flow_reopen.lua: an operator retried step ARGV[2] (a FAILED or DEAD step, now PENDING):
-- the steps its ending cancelled wait again, transitively, so the workflow goes on.
-- A cancelled step waits again only if no other parent of it has failed under its
-- 'cancel' rule; it waits for its parents that have not ended (a waiting or live one).
-- KEYS: the standard list (codec.lua). ARGV[1] skew, ARGV[2] request id.
-- Returns the number of steps that wait again.
local reopened = 0
local work = {ARGV[2]}
redis.call('HDEL', KEYS[13], 'c:' .. ARGV[2])
while #work > 0 do
  local pid = table.remove(work)
  local deps = redis.call('HGET', KEYS[13], 'd:' .. pid)
  if deps then
    for _, pair in ipairs(cjson.decode(deps)) do
      local child = pair[1]
      if redis.call('HEXISTS', KEYS[13], 'c:' .. child) == 1 then
        local spec = cjson.decode(redis.call('HGET', KEYS[13], 's:' .. child))
        local raws = flow_hmget(KEYS[1], spec.p)
        local waits, blocked = 0, false
        for i, parent in ipairs(spec.p) do
          local r = raws[i] and decode(parent, raws[i])
          if not raws[i] then
            if redis.call('HEXISTS', KEYS[13], 'n:' .. parent) == 1 then waits = waits + 1 end
          elseif not r or r.s == 'P' or r.s == 'C' then
            waits = waits + 1
          elseif r.s ~= 'K' and spec.o ~= 'continue' then
            blocked = true
          end
        end
        if not blocked and waits > 0 then
          -- Its cancelled record and error go; it waits, as it did before, for no record.
          redis.call('HDEL', KEYS[1], child)
          redis.call('HDEL', KEYS[10], child)
          unindex(child)
          redis.call('HDEL', KEYS[13], 'c:' .. child)
          redis.call('HSET', KEYS[13], 'n:' .. child, waits)
          reopened = reopened + 1
          work[#work + 1] = child
        end
      end
    end
  end
end
return reopened
