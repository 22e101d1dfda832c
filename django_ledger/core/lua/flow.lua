-- flow.lua: workflows (docs/workflows.md), prepended after store.lua to the scripts that
-- end records (settling.lua's settle_items, repair.lua) and to the flow_*.lua scripts.
-- A workflow lives in one queue, so in one hash slot. KEYS[13] (the flows hash) holds, for
-- workflow F and step id S (core/flows.py writes the JSON):
--   m:F  the manifest: the workflow's steps in order, with their parents and rules
--   k:F  how many of its steps still have entries (forget in codec.lua counts it down;
--        the last one deletes m:F, k:F and x:F)
--   x:F  set (to the server clock) when the workflow was cancelled
--   s:S  the step's spec: f workflow, p parent ids, o on failure ('cancel'/'continue'),
--        m how the parents' results go in ('none', 'spread', 'list'), h and t the
--        payload before and after them, x the payload without them
--   d:S  the steps that wait on S: a JSON array of [step id, its on-failure rule], so
--        that a parent's ending reads no child's spec unless it releases or cancels it
--   n:S  only while S waits: how many of its parents have not ended. A waiting step has
--        no record, so no claim, index or repair can see it.
--   c:S  S was cancelled: the id of the parent that ended it ('' the operator)

local FLOW_CHUNK = 1000  -- fields per HMGET/HSET: under Lua's unpack limit

-- HMGET of any number of fields, in order (false for a missing one).
local function flow_hmget(key, fields)
  local out = {}
  for i = 1, #fields, FLOW_CHUNK do
    local part = redis.call('HMGET', key, unpack(fields, i, math.min(i + FLOW_CHUNK - 1, #fields)))
    for j = 1, #part do out[#out + 1] = part[j] end
  end
  return out
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

local FLOW_ESCAPES = {['"'] = '\\"', ['\\'] = '\\\\', ['\n'] = '\\n', ['\r'] = '\\r',
  ['\t'] = '\\t', ['\b'] = '\\b', ['\f'] = '\\f'}

-- A JSON string as Python's json.dumps(ensure_ascii=False) writes it.
local function flow_json(s)
  local escaped = string.gsub(s, '[%z\1-\31"\\]', function(c)
    return FLOW_ESCAPES[c] or string.format('\\u%04x', string.byte(c))
  end)
  return '"' .. escaped .. '"'
end

-- Why parent `pid` (ended `pstate`) cancels its dependants: its last error's last line.
local function flow_cause(pid, pstate)
  if pstate == 'D' then
    return 'parent step ' .. pid .. ' ended DEAD (the ledger gave up on it after its attempts)'
  end
  local what = 'no error recorded'
  local doc = redis.call('HGET', KEYS[10], pid)
  if doc then
    local ok, d = pcall(cjson.decode, doc)
    if ok and type(d) == 'table' and type(d.attempts) == 'table' then
      for i = #d.attempts, 1, -1 do
        local e = type(d.attempts[i]) == 'table' and d.attempts[i].error
        if type(e) == 'table' then
          local last = ''
          if type(e.traceback) == 'string' then
            for line in string.gmatch(e.traceback, '[^\n]+') do last = line end
          end
          if last == '' then last = tostring(e.exception_class_path) end
          what = last
          break
        end
      end
    end
  end
  return 'parent step ' .. pid .. ' ended FAILED: ' .. what
end

-- Append an error attempt to id's result document (a new one if none; one with a return
-- value is replaced: a step that is cancelled never returned).
local function flow_add_error(now, id, text)
  local attempt = '{"worker_id":"","started_at":' .. exact(now) .. ',"finished_at":' ..
    exact(now) .. ',"error":{"exception_class_path":' ..
    '"django_ledger.tasks.workflows.StepCancelled","traceback":' .. flow_json(text) .. '}}'
  local doc = redis.call('HGET', KEYS[10], id)
  if doc and string.sub(doc, 1, 19) == '{"v":1,"attempts":[' and string.sub(doc, -2) == ']}' then
    local sep = ','
    if doc == '{"v":1,"attempts":[]}' then sep = '' end
    doc = string.sub(doc, 1, -3) .. sep .. attempt .. ']}'
  else
    doc = '{"v":1,"attempts":[' .. attempt .. ']}'
  end
  redis.call('HSET', KEYS[10], id, doc)
end

-- Write a step's first record (PENDING due now, or FAILED when cancelled), then its index.
local function flow_record(now, id, state, payload)
  if redis.call('HEXISTS', KEYS[1], id) == 1 then return end  -- never over another record
  local r = {s = state, due = now, att = 0, fence = 0, created = now, updated = now,
    owner = '', tlen = 0, tail = payload, prio = 0}
  redis.call('HSET', KEYS[1], id, encode(id, r))
  redis.call('ZADD', KEYS[INDEX_OF[state]], score_of(r), id)
end

-- Release waiting step `id`: its payload with its parents' outputs, PENDING, due now.
local function flow_release(now, id, spec)
  local payload = spec.x
  if spec.m == 'spread' or spec.m == 'list' then
    local docs = flow_hmget(KEYS[10], spec.p)
    local parts = {}
    for i = 1, #spec.p do parts[i] = flow_output(docs[i]) end
    local inputs = table.concat(parts, ',')
    if spec.m == 'list' then inputs = '[' .. inputs .. ']' end
    payload = spec.h .. inputs .. spec.t
  end
  flow_record(now, id, 'P', payload)
  wake(now)
end

-- End step `id` (waiting, or a PENDING record) as cancelled: a FAILED record whose error
-- says why; `cause_id` is the parent that ended it ('' the operator).
local function flow_cancel_step(now, id, spec, cause_id, text)
  flow_record(now, id, 'F', spec.x or '')
  flow_add_error(now, id, 'StepCancelled: ' .. text .. '\n')
  redis.call('HSET', KEYS[13], 'c:' .. id, cause_id)
end

-- Step `id` ended as `state` ('K', 'F', 'D'); `deps` its dependants (JSON). Each waiting
-- dependant is cancelled (the parent failed, its rule is 'cancel'), or counts one parent
-- fewer and is released with the last; a cancelled one ends its own dependants in turn.
-- A dependant that no longer waits (released, or cancelled by another parent) is skipped.
local function flow_ended(now, id, state, deps)
  local work = {{id, state, deps}}
  while #work > 0 do
    local item = table.remove(work)
    local pid, pstate = item[1], item[2]
    local children = cjson.decode(item[3])
    local cause
    for _, pair in ipairs(children) do
      local child, rule = pair[1], pair[2]
      local waiting = 'n:' .. child
      if redis.call('HEXISTS', KEYS[13], waiting) == 1 then
        -- A child's spec (its parents' ids: large for a chord's callback) is read only
        -- when it is released or cancelled, never per parent.
        if pstate ~= 'K' and rule ~= 'continue' then
          redis.call('HDEL', KEYS[13], waiting)
          cause = cause or flow_cause(pid, pstate)
          local spec = cjson.decode(redis.call('HGET', KEYS[13], 's:' .. child))
          flow_cancel_step(now, child, spec, pid, cause)
          local more = redis.call('HGET', KEYS[13], 'd:' .. child)
          if more then work[#work + 1] = {child, 'F', more} end
        elseif redis.call('HINCRBY', KEYS[13], waiting, -1) <= 0 then
          redis.call('HDEL', KEYS[13], waiting)
          flow_release(now, child, cjson.decode(redis.call('HGET', KEYS[13], 's:' .. child)))
        end
      end
    end
  end
end

-- The hook of the scripts that end records: of `ids` (whose decoded records `final`
-- holds), those that ended and are workflow steps with dependants move them on. One
-- HMGET for the lot: the whole cost for records that are no workflow's steps.
local function flow_settled(now, ids, final)
  local ended, fields = {}, {}
  for _, id in ipairs(ids) do
    local s = final[id].s
    if s == 'K' or s == 'F' or s == 'D' then
      ended[#ended + 1] = id
      fields[#fields + 1] = 'd:' .. id
    end
  end
  if #ended == 0 then return end
  local deps = redis.call('HMGET', KEYS[13], unpack(fields))
  for i, id in ipairs(ended) do
    if deps[i] then flow_ended(now, id, final[id].s, deps[i]) end
  end
end
