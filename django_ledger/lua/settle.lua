-- settle.lua: renew or settle a batch of claims.
-- KEYS: the standard eight (codec.lua).
-- ARGV[1] skew, then five per item: request id, owner, fence, target, ms.
--   target 'C' renews the lease to now + ms; 'P' gives the record back due at now + ms;
--   'K' (COMPLETED) or 'F' (FAILED) end it.
-- Returns {now, code, detail, ...}: code 1 applied (detail: the new bytes), 2 already
-- settled this way by this claim (detail: the stored bytes), 0 lost (detail: reason).
local now = server_now()
local out = {now}
for i = 2, #ARGV, 5 do
  local id, owner, fence = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local target, ms = ARGV[i + 3], tonumber(ARGV[i + 4])
  local raw = redis.call('HGET', KEYS[1], id)
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
    redis.call('ZREM', KEYS[3], id)
    if target == 'C' then
      r.lease = now + ms
    else
      r.lease = nil
      r.s = target
      if target == 'P' then r.due = now + ms end
    end
    r.updated = now
    raw = encode(id, r)
    redis.call('HSET', KEYS[1], id, raw)
    redis.call('ZADD', KEYS[INDEX_OF[r.s]], score_of(r), id)
    code, detail = 1, raw
  end
  out[#out + 1] = code
  out[#out + 1] = detail
end
return out
