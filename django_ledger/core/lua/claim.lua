-- claim.lua: claim up to a limit of due PENDING records for one owner.
-- KEYS: the standard ten (codec.lua).
-- ARGV[1] skew, ARGV[2] owner, ARGV[3] lease ms, ARGV[4] limit, ARGV[5] how many of the
-- claims start at once (the rest are held; absent: all start).
-- Returns {now, id, payload, attempt, fence, lease_until, traceparent, held (1/0), ...}.
local now = server_now()
local out = {now}
claim_due(now, ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), out, tonumber(ARGV[5]))
return out
