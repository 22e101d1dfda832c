-- indexes.lua: the library's second part (after codec.lua): the ready index's priority
-- bands and due times, fences, and forgetting and trimming ended records.

-- The index each state's records are in (KEYS.<name>: the queue's keys, named by the
-- first line of each function, core/library.py): read from KEYS at each call, since the
-- library's parts are built once, when it is loaded, before any call has keys.
-- A state letter is ended when string.find('KFD', s, 1, true) finds it.
local INDEX_NAME = {P = 'ready', C = 'leases', K = 'completed', F = 'failed', D = 'dead'}
local function index_of(s)
  return KEYS[INDEX_NAME[s]]
end

local function traceparent_of(r)
  if r.tlen == 0 then return '' end
  return string.sub(r.tail, 1, r.tlen)
end

-- Remove id from every index; returns how many entries went.
local function unindex(id)
  local n = 0
  for _, k in ipairs({KEYS.ready, KEYS.leases, KEYS.completed, KEYS.failed, KEYS.dead}) do
    n = n + redis.call('ZREM', k, id)
  end
  return n
end

-- The next fence of a claim whose record holds `floor`: the queue-wide counter moves on,
-- and never below the record's own fence (an imported record may hold a larger one), so
-- a fence is greater than every earlier fence of its id, also across a purge.
-- A missing counter (a new queue, or a Redis that lost its data) starts at the server
-- clock in microseconds: no queue claims a million a second, so the new counter starts
-- above every fence an earlier one gave, and fenced effects stored downstream with an
-- old fence still yield to the next attempt (docs/guarantees.md).
local function next_fence(floor)
  local counted = redis.call('INCR', KEYS.fences)
  local f = counted
  if f == 1 then f = server_now() * 1000 end
  if f <= floor then f = floor + 1 end
  if f ~= counted then redis.call('SET', KEYS.fences, string.format('%d', f)) end
  return f
end

-- A step's output for its dependants: the return value of its result document as
-- core/jobs.py encodes it ("return_value" its last member), else JSON null. A comma,
-- then '"return_value"' cannot occur inside a JSON string (its quotes would be escaped).
local function flow_output(doc)
  if not doc then return 'null' end
  local _, at = string.find(doc, ',%s*"return_value"%s*:')
  if not at then return 'null' end
  return string.sub(doc, at + 1, -2)
end

-- One of workflow `flow`'s steps has no entries left: the workflow's own go with its last.
local function flow_gone(flow)
  if redis.call('HINCRBY', KEYS.flows, 'k:' .. flow, -1) <= 0 then
    redis.call('HDEL', KEYS.flows, 'm:' .. flow, 'k:' .. flow, 'x:' .. flow)
  end
end

-- Delete a record and the result stored with it.
local function forget(id)
  redis.call('HDEL', KEYS.records, id)
  -- A workflow step's entries go with its record; the workflow's own with its last step
  -- (workflows.lua). One HGET for a record that is no step.
  local spec = redis.call('HGET', KEYS.flows, 's:' .. id)
  if spec then
    -- Steps that still wait for it will need its output: keep that (o:), and how many
    -- will read it (w:, counted down as each stops waiting, workflows.lua's flow_unwait),
    -- whatever purged the record (retention, max retained, an operator).
    local readers = 0
    local deps = redis.call('HGET', KEYS.flows, 'd:' .. id)
    if deps then
      for _, pair in ipairs(cjson.decode(deps)) do
        readers = readers + redis.call('HEXISTS', KEYS.flows, 'n:' .. pair[1])
      end
    end
    redis.call('HDEL', KEYS.flows, 's:' .. id, 'd:' .. id, 'n:' .. id, 'c:' .. id)
    if readers > 0 then
      redis.call('HSET', KEYS.flows, 'o:' .. id, flow_output(redis.call('HGET', KEYS.results, id)),
        'w:' .. id, readers)
    else
      flow_gone(cjson.decode(spec).f)
    end
  end
  redis.call('HDEL', KEYS.results, id)
  redis.call('HDEL', KEYS.progress, id)  -- what its task reported (core/progress.py)
  redis.call('HDEL', KEYS.limits, '@' .. id)  -- its key, in a queue with a KEY (keyed_claim.lua)
end

-- Purge the oldest ended records while more than max_retained are kept, looking at most at
-- `budget` index entries; returns how many records went. The record goes only if it is
-- still ended as its index says (anything else is repair's to sort out: the stale entry
-- alone is dropped, and is no purge: a corrupt record stays, for repair to quarantine).
local function trim_ended(max_retained, budget)
  local ended = redis.call('ZCARD', KEYS.completed) + redis.call('ZCARD', KEYS.failed)
    + redis.call('ZCARD', KEYS.dead)
  local purged, looked = 0, 0
  while ended > max_retained and looked < budget do
    local id, index, score
    for _, k in ipairs({KEYS.completed, KEYS.failed, KEYS.dead}) do
      local head = redis.call('ZRANGE', k, 0, 0, 'WITHSCORES')
      if head[1] and (not score or tonumber(head[2]) < score) then
        id, index, score = head[1], k, tonumber(head[2])
      end
    end
    if not id then break end
    redis.call('ZREM', index, id)
    local raw = redis.call('HGET', KEYS.records, id)
    local r = raw and decode(id, raw)
    if r and index_of(r.s) == index then
      forget(id)
      purged = purged + 1
    end
    ended, looked = ended - 1, looked + 1
  end
  return purged
end

-- The next priority band of the ready index at or above score `from` ('-inf' to start),
-- highest priority first: returns its lowest score, the due time of its earliest entry,
-- and where the band after it starts; nil when no band is left. One ZRANGEBYSCORE per
-- band in use (O(log n)), never a scan of entries.
local function next_band(from)
  local head = redis.call('ZRANGEBYSCORE', KEYS.ready, from, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if not head[1] then return nil end
  local score = tonumber(head[2])
  local low = math.floor(score / PRIORITY_STEP) * PRIORITY_STEP
  return low, score - low, exact(low + PRIORITY_STEP)
end

-- The earliest due time after `now` of a PENDING record, or nil: where an idle worker's
-- block should end. Two ZRANGEBYSCOREs per priority band in use.
local function next_due(now)
  local best
  local low, earliest, after = next_band('-inf')
  while low do
    local due = earliest
    if due <= now then
      local head = redis.call('ZRANGEBYSCORE', KEYS.ready, '(' .. exact(low + now), '(' .. after,
        'WITHSCORES', 'LIMIT', 0, 1)
      due = head[1] and tonumber(head[2]) - low
    end
    if due and (not best or due < best) then best = due end
    low, earliest, after = next_band(after)
  end
  return best
end

-- Whether a PENDING record is due now (at the head of a band).
local function due_now(now)
  local low, earliest, after = next_band('-inf')
  while low do
    if earliest <= now then return true end
    low, earliest, after = next_band(after)
  end
  return false
end
