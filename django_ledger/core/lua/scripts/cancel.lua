-- cancel.lua: an operator's cancel of one record (core/cancelling.py), a compare-and-set
-- on the record in one step: a PENDING record (due later, held by a limit, or due now)
-- ends FAILED and never runs; a CLAIMED one ends FAILED under a new fence, so the
-- cancelled run's renewals and settlement answer LOST (superseded) and its fenced
-- effects yield; an ended record is left as it is.
-- KEYS: the standard list (codec.lua).
-- ARGV[1] skew, ARGV[2] id, ARGV[3] by, ARGV[4] reason, ARGV[5] fence floor (the new fence
-- is at least this), ARGV[6] the bytes the caller saw ('' none: any live record),
-- ARGV[7] max retained.
-- Returns {code, state before, fence, bytes}: 1 cancelled (the new bytes), 2 already
-- ended (the stored bytes), 3 changed from ARGV[6] (the stored bytes), 0 missing, -1
-- corrupt (a quarantined id is either).
local now = server_now()
local id = ARGV[2]
local raw = redis.call('HGET', KEYS.records, id)
if not raw then return {0, '', 0, ''} end
local r = decode(id, raw)
if not r then return {-1, '', 0, raw} end
-- Ended before changed: a repeated cancel (or one racing a settlement) learns the end.
if string.find('KFD', r.s, 1, true) then return {2, r.s, r.fence, raw} end
if ARGV[6] ~= '' and ARGV[6] ~= raw then return {3, r.s, r.fence, raw} end
local was, owner, started, claimed_fence = r.s, r.owner, r.updated, r.fence
-- A new fence for either state: a CLAIMED record's run is superseded, and a PENDING one
-- whose lease repair took back may still have a run going (its effects yield too).
r.fence = next_fence(math.max(r.fence, tonumber(ARGV[5]) - 1))
r.s, r.updated, r.lease, r.held, r.given = 'F', now, nil, false, false
-- The record first, then its indexes.
raw = encode(id, r)
redis.call('HSET', KEYS.records, id, raw)
redis.call('ZREM', KEYS.ready, id)
redis.call('ZREM', KEYS.leases, id)
redis.call('ZREM', KEYS.held, 'h' .. id)
redis.call('ZADD', KEYS.failed, score_of(r), id)

-- The cancelled attempt in the result document (docs/tasks.md, "Cancelling"): the run's
-- owner and start when it was running, who cancelled, when (ISO 8601 and ms), and why.
local function iso(ms)
  local s = math.floor(ms / 1000)
  local z = math.floor(s / 86400) + 719468  -- days from 0000-03-01 (civil_from_days)
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524)
    - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local month = mp < 10 and mp + 3 or mp - 9
  local year = yoe + era * 400 + (month <= 2 and 1 or 0)
  local rem = s % 86400
  return string.format('%04d-%02d-%02dT%02d:%02d:%02d.%03dZ', year, month,
    doy - math.floor((153 * mp + 2) / 5) + 1, math.floor(rem / 3600),
    math.floor(rem % 3600 / 60), rem % 60, ms % 1000)
end
local by, reason = ARGV[3], ARGV[4]
local text = 'django_ledger.tasks.Cancelled: cancelled by ' .. by .. ' at ' .. iso(now)
if reason ~= '' then text = text .. ': ' .. reason end
local run = {extra = ',"cancelled":{"by":' .. json_string(by) .. ',"at":' .. exact(now) ..
  ',"reason":' .. json_string(reason) .. ',"was":"' .. was .. '","fence":' ..
  exact(r.fence) .. '}'}
if was == 'C' then run.worker, run.started = owner, started end
flow_add_error(now, id, text, 'django_ledger.tasks.Cancelled', run)

-- A workflow step's dependants move on as for a failed step; ended records stay bounded;
-- a freed slot of a CONCURRENCY limit wakes a worker that waits on it.
flow_settled(now, {id}, {[id] = r})
trim_ended(tonumber(ARGV[7]), 17)
-- A running claim's worker hears of it at once (core/worker/cancels.py reads the stream
-- while it runs tasks): the run's id, owner and fence, who cancelled it, when and why.
-- Bounded: about the last thousand cancels, gone a day after the last.
if was == 'C' then
  redis.call('XADD', KEYS.cancels, 'MAXLEN', '~', 1000, '*', 'id', id, 'owner', owner,
    'fence', exact(claimed_fence), 'by', by, 'at', exact(now), 'reason', reason)
  redis.call('PEXPIRE', KEYS.cancels, 86400000)
end
local L = limits_read()
if was == 'C' and L and due_now(now) and limits_room(L, now) > 0 then wake(now) end
return {1, was, r.fence, raw}
