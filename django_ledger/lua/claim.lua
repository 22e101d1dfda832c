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
  for _, id in ipairs(ids) do
    budget = budget - 1
    local raw = redis.call('HGET', KEYS[1], id)
    local r = raw and decode(id, raw)
    if not raw then
      -- An index entry without a record: the record is the truth, drop the entry.
      redis.call('ZREM', KEYS[2], id)
    elseif not r then
      skipped = skipped + 1  -- corrupt: left for repair to quarantine
    elseif r.s ~= 'P' or r.due > now then
      -- The index disagrees with the record: put the entry where the record says.
      redis.call('ZREM', KEYS[2], id)
      redis.call('ZADD', KEYS[INDEX_OF[r.s]], score_of(r), id)
    else
      r.s, r.owner, r.att, r.fence = 'C', owner, r.att + 1, r.fence + 1
      r.lease, r.updated = now + lease, now
      redis.call('HSET', KEYS[1], id, encode(id, r))
      redis.call('ZREM', KEYS[2], id)
      redis.call('ZADD', KEYS[3], r.lease, id)
      got = got + 1
      out[#out + 1] = id
      out[#out + 1] = payload_of(r)
      out[#out + 1] = r.att
      out[#out + 1] = r.fence
      out[#out + 1] = r.lease
      out[#out + 1] = traceparent_of(r)
    end
  end
end
return out
