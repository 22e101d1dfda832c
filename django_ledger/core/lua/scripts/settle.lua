-- settle.lua: renew, give back or settle a batch of claims (settling.lua, settle_items).
-- KEYS: the standard list (codec.lua).
-- ARGV[1] skew, ARGV[2] max retained, then six per item: request id, owner, fence,
-- target, ms, result.
-- Returns {now, code, detail, ...}, one pair per item.
local now = server_now()
local out = {now}
local ended = settle_items(now, 3, #ARGV, out)
-- Ended records are bounded by count: each batch purges the oldest past the bound, a
-- few more than it ended so a lowered bound is reached again.
if ended > 0 then trim_ended(tonumber(ARGV[2]), ended + 16) end
-- A settlement may free a slot of a CONCURRENCY limit: wake a worker that waits on it.
local L = limits_read()
if L and due_now(now) and limits_room(L, now) > 0 then wake(now) end
return out
