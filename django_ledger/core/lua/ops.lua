-- ops.lua: claiming and settling, shared by claim.lua, settle.lua and settle_claim.lua
-- (prepended after codec.lua), so a worker can settle and claim in one script call.

-- Claim the records of `ids` (read from the ready index) that are due PENDING ones;
-- answer the counts claim_due carries from round to round. Claims after the first
-- `start` of the call are held (claimed, not started), except a record whose last held
-- claim repair gave back: its claim counts as started, so an attempt is spent.
local function claim_ids(ids, now, owner, lease, out, got, skipped, budget, start)
  local stored = redis.call('HMGET', KEYS[1], unpack(ids))
  local records, taken, leases = {}, {}, {}
  for k, id in ipairs(ids) do
    budget = budget - 1
    local raw = stored[k]
    local r = raw and decode(id, raw)
    if not raw then
      -- An index entry without a record: the record is the truth, drop the entry.
      taken[#taken + 1] = id
    elseif not r then
      skipped = skipped + 1  -- corrupt: left for repair to quarantine
    elseif r.s ~= 'P' or r.due > now then
      -- The index disagrees with the record: put the entry where the record says.
      redis.call('ZREM', KEYS[2], id)
      redis.call('ZADD', KEYS[INDEX_OF[r.s]], score_of(r), id)
    else
      r.s, r.owner, r.att, r.fence = 'C', owner, r.att + 1, next_fence(r.fence)
      r.lease, r.updated = now + lease, now
      r.held, r.given = got >= start and not r.given, false
      records[#records + 1] = id
      records[#records + 1] = encode(id, r)
      taken[#taken + 1] = id
      leases[#leases + 1] = r.lease
      leases[#leases + 1] = id
      got = got + 1
      out[#out + 1] = id
      out[#out + 1] = payload_of(r)
      out[#out + 1] = r.att
      out[#out + 1] = r.fence
      out[#out + 1] = r.lease
      out[#out + 1] = traceparent_of(r)
      out[#out + 1] = r.held and 1 or 0
    end
  end
  -- Records first, then the indexes they derive (one command each for the round).
  if #records > 0 then redis.call('HSET', KEYS[1], unpack(records)) end
  if #taken > 0 then redis.call('ZREM', KEYS[2], unpack(taken)) end
  if #leases > 0 then redis.call('ZADD', KEYS[3], unpack(leases)) end
  return got, skipped, budget
end

-- Claim up to `limit` due PENDING records for `owner` until now + lease, appending
-- {id, payload, attempt, fence, lease_until, traceparent, held} per claim to `out`; the
-- first `start` claims start at once, the rest are held (nil: none is held).
-- Returns the claims made and the earliest due time of a PENDING record left (-1: none;
-- now: more is due now), so that an idle worker blocks until then and no longer. The wake key follows: a call that filled its limit while more is
-- due sets it (another idle worker takes the rest); one that left nothing due deletes it.
local function claim_due(now, owner, lease, limit, out, start)
  start = start or limit
  -- The gate is checked here, in the same atomic step as the claim itself.
  -- Closed: look again in a second (opening the gate writes no wake key).
  if redis.call('EXISTS', KEYS[4]) == 1 then return 0, now + 1000 end
  local got, skipped = 0, 0
  -- Bound the work one call may do when the head of the index holds corrupt records.
  local budget = limit * 4 + 64
  -- Priority bands, highest first; within a band, the earliest due first.
  local low, earliest, after = next_band('-inf')
  while low and got < limit and budget > 0 do
    local ids = {}
    if earliest <= now then
      ids = redis.call('ZRANGEBYSCORE', KEYS[2], exact(low), exact(low + now),
        'LIMIT', skipped, limit - got)
    end
    if #ids == 0 then
      -- Nothing (more) due in this band: on to the next one in use.
      low, earliest, after = next_band(after)
      skipped = 0
    else
      got, skipped, budget = claim_ids(ids, now, owner, lease, out, got, skipped, budget, start)
    end
  end
  if budget <= 0 and got < limit then return got, -1 end  -- corrupt records at the head
  if got >= limit and due_now(now) then
    wake(now)  -- more is due than this call took: another idle worker takes the rest
    return got, now
  end
  -- Nothing (more) is due now: a marker left is stale. Deleting a key that is not there
  -- writes nothing, so a claim that finds nothing changes nothing.
  redis.call('DEL', KEYS[11])
  return got, next_due(now) or -1
end

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
  local stored = redis.call('HMGET', KEYS[1], unpack(ids))
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
    local records, adds = {}, {[2] = {}, [3] = {}, [6] = {}, [7] = {}}
    for _, id in ipairs(order) do
      records[#records + 1] = id
      records[#records + 1] = latest[id]
      local index = INDEX_OF[final[id].s]
      local add = adds[index]
      add[#add + 1] = score_of(final[id])
      add[#add + 1] = id
      if index > 3 then ended = ended + 1 end
    end
    redis.call('HSET', KEYS[1], unpack(records))
    if #results > 0 then redis.call('HSET', KEYS[10], unpack(results)) end
    redis.call('ZREM', KEYS[3], unpack(order))
    for index, add in pairs(adds) do
      if #add > 0 then redis.call('ZADD', KEYS[index], unpack(add)) end
    end
    -- Workflows: a step that ended moves its waiting dependants on (flow.lua).
    flow_settled(now, order, final)
  end
  if due then wake(now) end
  return ended
end
