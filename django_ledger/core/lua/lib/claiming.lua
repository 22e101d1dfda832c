-- claiming.lua: a claim's write. claim_limited takes due PENDING records for an owner
-- under the queue's limits (limits_accounting.lua; with a KEY, keyed_claim.lua), and
-- claim_ids writes each claim: the record CLAIMED with a new fence and lease, then its
-- index. Shared by claim.lua, settle_claim.lua and keyed_claim.lua; settling.lua holds
-- the settlements, so a claim alone carries no settlement code.

-- keyed_claim.lua (after this file in the library) sets it: claim_limited with a KEY.
local keyed_claim

-- Claim the records of `ids` (read from the ready index) that are due PENDING ones;
-- answer the counts claim_due carries from round to round. Claims after the first
-- `start` of the call are held (claimed, not started), except a record whose last held
-- claim repair gave back: its claim counts as started, so an attempt is spent.
local function claim_ids(ids, now, owner, lease, out, got, skipped, budget, start)
  local stored = redis.call('HMGET', KEYS.records, unpack(ids))
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
      redis.call('ZREM', KEYS.ready, id)
      redis.call('ZADD', index_of(r.s), score_of(r), id)
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
  if #records > 0 then redis.call('HSET', KEYS.records, unpack(records)) end
  if #taken > 0 then redis.call('ZREM', KEYS.ready, unpack(taken)) end
  if #leases > 0 then redis.call('ZADD', KEYS.leases, unpack(leases)) end
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
  if redis.call('EXISTS', KEYS.gate) == 1 then return 0, now + 1000 end
  local got, skipped = 0, 0
  -- Bound the work one call may do when the head of the index holds corrupt records.
  local budget = limit * 4 + 64
  -- Priority bands, highest first; within a band, the earliest due first.
  local low, earliest, after = next_band('-inf')
  while low and got < limit and budget > 0 do
    local ids = {}
    if earliest <= now then
      ids = redis.call('ZRANGEBYSCORE', KEYS.ready, exact(low), exact(low + now),
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
  redis.call('DEL', KEYS.wake)
  return got, next_due(now) or -1
end

-- claim_due under the queue's limits, same arguments and answers. The first
-- `start` claims start at once, as the limits allow; those beyond are held (prefetched)
-- only from headroom (limits_extra). When the limits stop this call while more is due,
-- no other worker could start it either: the wake key goes, and the answer is when the
-- limits let the next claim be made (-1: a freed slot will wake one). `known` true: the
-- caller read the limits already, `L` (nil: none).
local function claim_limited(now, owner, lease, limit, out, start, L, known)
  if not known then L = limits_read() end
  if not L then return claim_due(now, owner, lease, limit, out, start) end
  if L.key then return keyed_claim(L, now, owner, lease, limit, out, start) end
  local starts = (start and start < limit) and start or limit
  local room = limits_room(L, now)
  local take = math.min(starts, room)
  local extra = 0
  if L.limit or take == starts then extra = limits_extra(L, limit, take, take < starts) end
  if take < starts then extra = 0 end
  -- take 0 claims none; it still checks the gate and passes a wake-up on when it may.
  local from = #out + 1
  local got, next_at = claim_due(now, owner, lease, take + extra, out, take)
  limits_spend(L, now, got, limits_hold(L, out, from))
  if got >= room and next_at == now then
    redis.call('DEL', KEYS.wake)
    next_at = limits_next(L, now)
  elseif next_at == now and take == starts and extra < limit - take then
    -- More is due, and only the headroom rule stopped this call's held claims: a worker
    -- with a thread free may start it (the wake key stays), and this caller, whose
    -- threads are all served, waits for one of its own (or a wake-up), not a due time.
    next_at = -1
  end
  return got, next_at
end
