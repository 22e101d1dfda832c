-- sweep.lua: find by the indexes what repair must look at now, whatever the scan's cursor.
-- KEYS: the standard list (codec.lua).
-- ARGV[1] skew, ARGV[2] retention ms, ARGV[3] most entries to look at per index,
-- ARGV[4] max retained. First purges up to ARGV[3] of the oldest ended records past
-- max retained (ended records are bounded by count as well as by retention). Drops index
-- entries whose record is gone (only a script that failed midway, or a hand, leaves
-- them). Returns {dropped, purged, id, bytes, ...}: the records whose lease has expired
-- or whose retention has ended, for the caller to repair against these bytes. Sets the
-- wake key when records are due that no worker has claimed.
local now = server_now()
local limit = tonumber(ARGV[3])
local out, seen, dropped, due = {0, 0}, {}, 0, false
out[2] = trim_ended(tonumber(ARGV[4]), limit)

local function visit(index, upto, collect)
  local ids = redis.call('ZRANGEBYSCORE', index, '-inf', upto, 'LIMIT', 0, limit)
  for _, id in ipairs(ids) do
    if not seen[id] then
      seen[id] = true
      local raw = redis.call('HGET', KEYS.records, id)
      if not raw then
        unindex(id)
        dropped = dropped + 1
      elseif collect then
        out[#out + 1] = id
        out[#out + 1] = raw
      else
        due = true
      end
    end
  end
end

visit(KEYS.ready, now, false)  -- due entries: only orphans matter here, claims take the rest
-- Due records nobody has claimed: wake an idle worker. The safety net of the wake key, for
-- a worker that learnt a due time (a retry's) and stopped before it came.
if due then wake(now) end
visit(KEYS.leases, now, true)   -- expired leases
local ended = now - tonumber(ARGV[2])
for _, index in ipairs({KEYS.completed, KEYS.failed, KEYS.dead}) do visit(index, ended, true) end
out[1] = dropped
return out
