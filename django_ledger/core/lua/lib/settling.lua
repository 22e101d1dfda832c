-- settling.lua: settlements, shared by settle.lua and settle_claim.lua (after workflows.lua
-- in the library: an ended workflow step moves its dependants on).

-- Settle the items ARGV[first], ARGV[first + 6], ...: six each, request id, owner, fence,
-- target, ms, result. Target 'C' renews the lease to now + ms; 'S' renews it too and
-- marks a held claim started; 'P' gives the record back due at now + ms (a retry); 'R'
-- gives it back due now without spending the attempt (it never started); 'K' (COMPLETED)
-- or 'F' (FAILED) end it. A result ('' for none) is
-- stored in the results hash in the same step as the settlement it comes with.
-- Appends {code, detail} per item to `out`: 1 applied (detail: the new bytes), 2 already
-- settled this way by this claim (detail: the stored bytes), 0 lost (detail: reason).
-- Returns how many records the batch ended.
local function settle_items(now, first, last, out)
  local ids = {}
  for i = first, last, 6 do ids[#ids + 1] = ARGV[i] end
  if #ids == 0 then return 0 end
  -- One read for the batch; `latest` holds what this batch already wrote, so an id that
  -- comes twice is judged against its newest bytes, as if the items ran one by one.
  local stored = redis.call('HMGET', KEYS.records, unpack(ids))
  local latest, final, order, results = {}, {}, {}, {}
  local due = false
  for k, id in ipairs(ids) do
    local i = first + 6 * (k - 1)
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
      if target == 'C' or target == 'S' then
        r.lease = now + ms
        if target == 'S' then r.held = false end
      else
        r.lease, r.held = nil, false
        if target == 'R' then
          r.s, r.due, r.att = 'P', now, r.att - 1
        else
          r.s = target
          if target == 'P' then r.due = now + ms end
        end
        -- Given back due now (released, or retried without a delay): wake a worker.
        due = due or (r.s == 'P' and r.due <= now)
      end
      -- A plain renewal keeps updated_at, so a CLAIMED record's updated_at stays its
      -- attempt's start ('S', a held claim starting, moves it to now).
      if target ~= 'C' then r.updated = now end
      raw = encode(id, r)
      if not final[id] then order[#order + 1] = id end
      latest[id] = raw
      final[id] = r
      if ARGV[i + 5] ~= '' then
        results[#results + 1] = id
        results[#results + 1] = ARGV[i + 5]
      end
      code, detail = 1, raw
    end
    out[#out + 1] = code
    out[#out + 1] = detail
  end
  local ended = 0
  if #order > 0 then
    -- Records first, then their indexes: every applied id was CLAIMED (in leases) before
    -- this batch, and ends in the index its last state calls for.
    local records, adds = {}, {[KEYS.ready] = {}, [KEYS.leases] = {}, [KEYS.completed] = {}, [KEYS.failed] = {}}
    for _, id in ipairs(order) do
      records[#records + 1] = id
      records[#records + 1] = latest[id]
      local index = index_of(final[id].s)
      local add = adds[index]
      add[#add + 1] = score_of(final[id])
      add[#add + 1] = id
      if string.find('KFD', final[id].s, 1, true) then ended = ended + 1 end
    end
    redis.call('HSET', KEYS.records, unpack(records))
    if #results > 0 then redis.call('HSET', KEYS.results, unpack(results)) end
    redis.call('ZREM', KEYS.leases, unpack(order))
    for index, add in pairs(adds) do
      if #add > 0 then redis.call('ZADD', index, unpack(add)) end
    end
    -- Workflows: a step that ended moves its waiting dependants on (workflows.lua).
    flow_settled(now, order, final)
  end
  if due then wake(now) end
  return ended
end
