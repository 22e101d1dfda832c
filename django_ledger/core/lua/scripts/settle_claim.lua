-- settle_claim.lua: settle a batch of claims, then claim more for the same owner, in one
-- step: a worker that has just finished asks for its next work in the same round trip.
-- KEYS: the standard list (codec.lua).
-- ARGV[1] skew, ARGV[2] max retained, ARGV[3] owner, ARGV[4] lease ms, ARGV[5] limit,
-- ARGV[6] n items, then six per item as settle.lua takes them, then (optional) how many
-- of the claims start at once (the rest are held; absent: all start).
-- Returns {now, next due (as claim.lua), n, code, detail (n pairs), then claims as
-- claim.lua returns them}. The claim runs under the queue's limits (limits_accounting.lua) after
-- the settlements: a slot one of them freed is free for it, and a claim of 0 passes the
-- wake-up on to a waiting worker while the limits let one more be claimed.
local now = server_now()
local n = tonumber(ARGV[6])
local out = {now, -1, n}
local L = limits_read()
local ended = settle_items(now, 7, 6 + 6 * n, out)
if ended > 0 then trim_ended(tonumber(ARGV[2]), ended + 16) end
limits_settled(L, 7, 6 + 6 * n, out, 4)  -- held claims started or ended: their tokens are spent
local _, next_at = claim_limited(now, ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), out,
  tonumber(ARGV[7 + 6 * n]), L, true)
out[2] = next_at
return out
