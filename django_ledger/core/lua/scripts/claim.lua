-- claim.lua: claim up to a limit of due PENDING records for one owner, under the queue's
-- limits (limits_accounting.lua).
-- KEYS: the standard list (codec.lua).
-- ARGV[1] skew, ARGV[2] owner, ARGV[3] lease ms, ARGV[4] limit, ARGV[5] how many of the
-- claims start at once (the rest are held; absent: all start).
-- Returns {now, next due, id, payload, attempt, fence, lease_until, traceparent, held (1/0),
-- ...}; next due: the earliest due time of a PENDING record left (-1: none, or every
-- limited slot taken; now: more is due now; a second on while the gate is closed; when
-- the next token is due while a rate holds the rest).
local now = server_now()
local out = {now, -1}
local _, next_at = claim_limited(now, ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), out,
  tonumber(ARGV[5]))
out[2] = next_at
return out
