-- ops.lua: claiming, shared by claim.lua, settle_claim.lua and keyed.lua's claims
-- (prepended after store.lua); settling.lua holds the settlements, so that a worker can
-- settle and claim in one script call and a claim alone carries no settlement code.

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
