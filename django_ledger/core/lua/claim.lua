-- claim.lua: claim up to a limit of due PENDING records for one owner.
-- KEYS: the standard eight (codec.lua).
-- ARGV[1] skew, ARGV[2] owner, ARGV[3] lease ms, ARGV[4] limit.
-- Returns {now, id, payload, attempt, fence, lease_until, traceparent, ...}.
local now = server_now()
-- The gate is checked here, in the same atomic step as the claim itself.
if redis.call('EXISTS', KEYS[4]) == 1 then return {now} end
local owner, lease, limit = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local out = {now}
local got, skipped = 0, 0
-- Bound the work one call may do when the head of the index holds corrupt records.
local budget = limit * 4 + 64
while got < limit and budget > 0 do
  local ids = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', skipped, limit - got)
  if #ids == 0 then break end
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
      r.s, r.owner, r.att, r.fence = 'C', owner, r.att + 1, r.fence + 1
      r.lease, r.updated = now + lease, now
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
    end
  end
  -- Records first, then the indexes they derive (one command each for the round).
  if #records > 0 then redis.call('HSET', KEYS[1], unpack(records)) end
  if #taken > 0 then redis.call('ZREM', KEYS[2], unpack(taken)) end
  if #leases > 0 then redis.call('ZADD', KEYS[3], unpack(leases)) end
end
return out
