-- settle.lua: renew or settle a batch of claims.
-- KEYS: the standard eight (codec.lua).
-- ARGV[1] skew, then five per item: request id, owner, fence, target, ms.
--   target 'C' renews the lease to now + ms; 'P' gives the record back due at now + ms;
--   'K' (COMPLETED) or 'F' (FAILED) end it.
-- Returns {now, code, detail, ...}: code 1 applied (detail: the new bytes), 2 already
-- settled this way by this claim (detail: the stored bytes), 0 lost (detail: reason).
local now = server_now()
local ids = {}
for i = 2, #ARGV, 5 do ids[#ids + 1] = ARGV[i] end
-- One read for the batch; `latest` holds what this batch already wrote, so an id that
-- comes twice is judged against its newest bytes, as if the items ran one by one.
local stored = redis.call('HMGET', KEYS[1], unpack(ids))
local latest, final, order = {}, {}, {}
local out = {now}
for k, id in ipairs(ids) do
  local i = 2 + 5 * (k - 1)
  local owner, fence, target, ms = ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3], tonumber(ARGV[i + 4])
  local raw = latest[id] or stored[k]
  local r = raw and decode(id, raw)
  local code, detail = 0, ''
  if not raw then
    detail = 'missing'
  elseif not r then
    detail = 'corrupt'
  elseif r.fence ~= fence or r.owner ~= owner then
    detail = 'superseded'
  elseif r.s ~= 'C' then
    -- A replay of the settlement that already ended this claim answers the same again.
    if r.s == target and (target == 'K' or target == 'F') then
      code, detail = 2, raw
    else
      detail = 'not_claimed'
    end
  elseif now >= r.lease then
    -- Judged by the server clock, in the same step as the write.
    detail = 'lease_expired'
  else
    if target == 'C' then
      r.lease = now + ms
    else
      r.lease = nil
      r.s = target
      if target == 'P' then r.due = now + ms end
    end
    r.updated = now
    raw = encode(id, r)
    if not final[id] then order[#order + 1] = id end
    latest[id] = raw
    final[id] = r
    code, detail = 1, raw
  end
  out[#out + 1] = code
  out[#out + 1] = detail
end
if #order > 0 then
  -- Records first, then their indexes: every applied id was CLAIMED (in leases) before
  -- this batch, and ends in the index its last state calls for.
  local records, adds = {}, {[2] = {}, [3] = {}, [6] = {}, [7] = {}}
  for _, id in ipairs(order) do
    records[#records + 1] = id
    records[#records + 1] = latest[id]
    local add = adds[INDEX_OF[final[id].s]]
    add[#add + 1] = score_of(final[id])
    add[#add + 1] = id
  end
  redis.call('HSET', KEYS[1], unpack(records))
  redis.call('ZREM', KEYS[3], unpack(order))
  for index, add in pairs(adds) do
    if #add > 0 then redis.call('ZADD', KEYS[index], unpack(add)) end
  end
end
return out
