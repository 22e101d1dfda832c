-- repair.lua: repair a page of records, each against the exact bytes the caller read.
-- KEYS: the standard list (codec.lua).
-- ARGV[1] skew, ARGV[2] retention ms, ARGV[3] max attempts, ARGV[4..] pairs of id, observed bytes.
-- Returns one code per pair: 0 stale (changed since read: left alone), 1 fine,
-- 2 reindexed, 3 expired lease returned to PENDING, 4 DEAD, 5 quarantined, 6 purged.
-- A held claim (its work never started) whose lease expired goes back PENDING with its
-- attempt given back (code 3 too), marked so that its next claim is not held.
-- An unheld (started) claim's attempt is lost: it is appended to the task's result
-- document in KEYS.results (core/history.py: the same bytes), with the owner, updated_at as
-- its start and the lease's expiry as its end: the next claim overwrites both.
local now = server_now()
local retention, max_attempts = tonumber(ARGV[2]), tonumber(ARGV[3])

local function quarantine(id, raw)
  unindex(id)
  if redis.call('HGET', KEYS.quarantine, id) == raw then return 1 end
  redis.call('HSET', KEYS.quarantine, id, raw)
  return 5
end

-- Append the lost attempt of r (its lease expired unsettled) to the stored result
-- document: only one of exactly v 1 and attempts, as workers write it (history.py's
-- with_attempt); any other is left alone.
local function record_lost(id, r)
  local who, n = r.owner, r.att
  local text = 'Attempt ' .. n .. " was claimed by worker '" .. who .. "', which stopped " ..
    "before it settled (it died, or lost its lease); the ledger's repair took the task " ..
    'back.\nLeaseExpired: attempt ' .. n .. ' never settled\n'
  local attempt = '{"worker_id":' .. json_string(who) .. ',"started_at":' ..
    string.format('%d', r.updated) .. ',"finished_at":' .. string.format('%d', r.lease) ..
    ',"error":{"exception_class_path":"django_ledger.tasks.exceptions.LeaseExpired",' ..
    '"traceback":' .. json_string(text) .. '}}'
  local doc = redis.call('HGET', KEYS.results, id)
  if not doc then
    doc = '{"v":1,"attempts":[' .. attempt .. ']}'
  else
    local ok, d = pcall(cjson.decode, doc)
    if not ok or type(d) ~= 'table' or type(d.attempts) ~= 'table' then return end
    for key in pairs(d) do
      if key ~= 'v' and key ~= 'attempts' then return end
    end
    if string.sub(doc, 1, 19) ~= '{"v":1,"attempts":[' or string.sub(doc, -2) ~= ']}' then return end
    local sep = ','
    if #d.attempts == 0 then sep = '' end
    doc = string.sub(doc, 1, -3) .. sep .. attempt .. ']}'
  end
  redis.call('HSET', KEYS.results, id, doc)
end

local function repair(id, raw)
  local r = decode(id, raw)
  if not r then return quarantine(id, raw) end
  -- Bytes that decode again (put right by hand) are back in service: a quarantined copy
  -- of what they were is obsolete.
  local restored = redis.call('HDEL', KEYS.quarantine, id)
  if r.s == 'C' and now >= r.lease then
    local code = 3
    if not r.held then record_lost(id, r) end
    r.lease, r.updated = nil, now
    if r.held then
      r.s, r.due, r.att, r.held, r.given = 'P', now, r.att - 1, false, true
    elseif r.att >= max_attempts then
      r.s, code = 'D', 4
    else
      r.s, r.due = 'P', now
    end
    redis.call('HSET', KEYS.records, id, encode(id, r))
    unindex(id)
    redis.call('ZADD', index_of(r.s), score_of(r), id)
    if r.s == 'P' then wake(now) end  -- due now: an idle worker claims it at once
    if r.s == 'D' then flow_settled(now, {id}, {[id] = r}) end  -- a workflow step moves on
    return code
  end
  if string.find('KFD', r.s, 1, true) and r.updated + retention <= now then
    forget(id)
    unindex(id)
    return 6
  end
  local own = index_of(r.s)
  local changed = restored + redis.call('ZADD', own, 'CH', score_of(r), id)
  for _, k in ipairs({KEYS.ready, KEYS.leases, KEYS.completed, KEYS.failed, KEYS.dead}) do
    if k ~= own then changed = changed + redis.call('ZREM', k, id) end
  end
  if changed > 0 then return 2 end
  return 1
end

local out = {}
for i = 4, #ARGV, 2 do
  local id, seen = ARGV[i], ARGV[i + 1]
  -- Compare-and-set on the observed bytes: a stale pass never overwrites a newer claim.
  if redis.call('HGET', KEYS.records, id) ~= seen then
    out[#out + 1] = 0
  else
    out[#out + 1] = repair(id, seen)
  end
end
return out
