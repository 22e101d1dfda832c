-- workflows.lua: workflows (docs/workflows.md), after indexes.lua in the library: read by
-- what ends records (settling.lua's settle_items, repair.lua) and by the flow_*.lua scripts.
-- A workflow lives in one queue, so in one hash slot. KEYS.flows (the flows hash) holds, for
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
--   o:S  S's record was purged while steps still waited for it: its output, for them
--   w:S  how many of those still wait (indexes.lua's forget writes both; flow_unwait counts
--        down and deletes them with the last, and only then does S stop counting in k:F)

local FLOW_CHUNK = 1000  -- fields per HMGET/HSET: under Lua's unpack limit
-- The most bytes a released step's parents' outputs and its own payload may come to
-- (MAX_STEP_INPUT_BYTES in core/flows.py, the same): the release builds the payload inside
-- the settling call, which holds Redis while it runs, and a worker then reads it whole.
local FLOW_MAX_INPUT_BYTES = 4194304
-- Parents' results read per HMGET while a release adds them up: a release over the bound
-- stops after reading at most this many more than it needed.
local FLOW_READ_CHUNK = 64

-- HMGET of any number of fields, in order (false for a missing one).
local function flow_hmget(key, fields)
  local out = {}
  for i = 1, #fields, FLOW_CHUNK do
    local part = redis.call('HMGET', key, unpack(fields, i, math.min(i + FLOW_CHUNK - 1, #fields)))
    for j = 1, #part do out[#out + 1] = part[j] end
  end
  return out
end

local JSON_ESCAPES = {['"'] = '\\"', ['\\'] = '\\\\', ['\n'] = '\\n', ['\r'] = '\\r',
  ['\t'] = '\\t', ['\b'] = '\\b', ['\f'] = '\\f'}

-- A JSON string as Python's json.dumps(ensure_ascii=False) writes it: the library's one
-- JSON encoder (repair.lua's lost attempts and the workflows' errors use it).
local function json_string(s)
  local escaped = string.gsub(s, '[%z\1-\31"\\]', function(c)
    return JSON_ESCAPES[c] or string.format('\\u%04x', string.byte(c))
  end)
  return '"' .. escaped .. '"'
end

-- Why parent `pid` (ended `pstate`) cancels its dependants: its last error's last line.
local function flow_cause(pid, pstate)
  if pstate == 'D' then
    return 'parent step ' .. pid .. ' ended DEAD (the ledger gave up on it after its attempts)'
  end
  local what = 'no error recorded'
  local doc = redis.call('HGET', KEYS.results, pid)
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

-- Append an error attempt of `class` (a dotted path) to id's result document (a new one if
-- none; one with a return value is replaced: a step that is cancelled never returned).
-- `run` (optional): {worker = owner, started = ms, extra = ',"name":<JSON>' in the error}.
local function flow_add_error(now, id, text, class, run)
  run = run or {}
  local attempt = '{"worker_id":' .. json_string(run.worker or '') .. ',"started_at":' ..
    exact(run.started or now) .. ',"finished_at":' ..
    exact(now) .. ',"error":{"exception_class_path":"' ..
    (class or 'django_ledger.tasks.workflows.StepCancelled') .. '","traceback":' ..
    json_string(text) .. (run.extra or '') .. '}}'
  local doc = redis.call('HGET', KEYS.results, id)
  if doc and string.sub(doc, 1, 19) == '{"v":1,"attempts":[' and string.sub(doc, -2) == ']}' then
    local sep = ','
    if doc == '{"v":1,"attempts":[]}' then sep = '' end
    doc = string.sub(doc, 1, -3) .. sep .. attempt .. ']}'
  else
    doc = '{"v":1,"attempts":[' .. attempt .. ']}'
  end
  redis.call('HSET', KEYS.results, id, doc)
end

-- Write a step's first record (PENDING due now, or FAILED when cancelled), then its index.
local function flow_record(now, id, state, payload)
  if redis.call('HEXISTS', KEYS.records, id) == 1 then return end  -- never over another record
  local r = {s = state, due = now, att = 0, fence = 0, created = now, updated = now,
    owner = '', tlen = 0, tail = payload, prio = 0}
  redis.call('HSET', KEYS.records, id, encode(id, r))
  redis.call('ZADD', index_of(state), score_of(r), id)
end

-- Waiting step `spec` stops waiting (released or ended): the outputs kept for it of its
-- purged parents (o:, w:; indexes.lua's forget) have one reader fewer, and go with the last.
local function flow_unwait(spec)
  if not spec.p then return end
  local fields = {}
  for i, parent in ipairs(spec.p) do fields[i] = 'w:' .. parent end
  local readers = flow_hmget(KEYS.flows, fields)
  for i, parent in ipairs(spec.p) do
    if readers[i] and redis.call('HINCRBY', KEYS.flows, fields[i], -1) <= 0 then
      redis.call('HDEL', KEYS.flows, fields[i], 'o:' .. parent)
      flow_gone(spec.f)
    end
  end
end

-- The inputs of waiting step `spec` from its parents' outputs, in parent order; or nil and
-- why not (the cause's parent id and its text): a parent purged with no output kept for
-- it, or outputs past FLOW_MAX_INPUT_BYTES (counted before they are joined, read a few at
-- a time, so an oversized release stops early and holds little memory).
local function flow_inputs(spec)
  local parts = {}
  local size = #spec.h + #spec.t + 2
  local n = #spec.p
  for first = 1, n, FLOW_READ_CHUNK do
    local last = math.min(first + FLOW_READ_CHUNK - 1, n)
    local docs = redis.call('HMGET', KEYS.results, unpack(spec.p, first, last))
    for k = first, last do
      local parent, doc = spec.p[k], docs[k - first + 1]
      local out
      if doc then
        out = flow_output(doc)
      else
        out = redis.call('HGET', KEYS.flows, 'o:' .. parent)
        if not out then
          if redis.call('HEXISTS', KEYS.records, parent) == 0 then
            return nil, parent, 'parent step ' .. parent .. ' was purged (RETENTION or ' ..
              'MAX_RETAINED) before this step was released, and its result with it'
          end
          out = 'null'  -- ended without a result document (a raw handler, an operator)
        end
      end
      size = size + #out + 1
      if size > FLOW_MAX_INPUT_BYTES then
        return nil, parent, 'the results of its ' .. n .. ' parents and its own arguments ' ..
          'come to more than ' .. FLOW_MAX_INPUT_BYTES .. ' bytes (MAX_STEP_INPUT_BYTES) at ' ..
          'parent step ' .. parent .. ': pass references to large data, not the data'
      end
      parts[k] = out
    end
  end
  return table.concat(parts, ',')
end

-- Release waiting step `id`: its payload with its parents' outputs, PENDING, due now.
-- Returns nil, or the cause's parent id and its text when it could not be released (it is
-- then FAILED with a StepReleaseFailed error, and its dependants move on from there).
local function flow_release(now, id, spec)
  local payload = spec.x
  if spec.m == 'spread' or spec.m == 'list' then
    local inputs, cause, text = flow_inputs(spec)
    if not inputs then
      flow_unwait(spec)
      flow_record(now, id, 'F', spec.x or '')
      flow_add_error(now, id, 'StepReleaseFailed: ' .. text .. '\n',
        'django_ledger.tasks.workflows.StepReleaseFailed')
      return cause, text
    end
    if spec.m == 'list' then inputs = '[' .. inputs .. ']' end
    payload = spec.h .. inputs .. spec.t
  end
  flow_unwait(spec)
  flow_record(now, id, 'P', payload)
  wake(now)
  return nil
end

-- End step `id` (waiting, or a PENDING record) as cancelled: a FAILED record whose error
-- says why; `cause_id` is the parent that ended it ('' the operator).
local function flow_cancel_step(now, id, spec, cause_id, text)
  if redis.call('HEXISTS', KEYS.records, id) == 0 then flow_unwait(spec) end  -- it was waiting
  flow_record(now, id, 'F', spec.x or '')
  flow_add_error(now, id, 'StepCancelled: ' .. text .. '\n')
  redis.call('HSET', KEYS.flows, 'c:' .. id, cause_id)
end

-- Step `id` ended as `state` ('K', 'F', 'D'); `deps` its dependants (JSON). Each waiting
-- dependant is cancelled (the parent failed, its rule is 'cancel'), or counts one parent
-- fewer and is released with the last; a cancelled one, or one whose release failed, ends
-- its own dependants in turn. A dependant that no longer waits (released, or cancelled by
-- another parent) is skipped.
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
      if redis.call('HEXISTS', KEYS.flows, waiting) == 1 then
        -- A child's spec (its parents' ids: large for a chord's callback) is read only
        -- when it is released or cancelled, never per parent.
        local ended = false
        if pstate ~= 'K' and rule ~= 'continue' then
          redis.call('HDEL', KEYS.flows, waiting)
          cause = cause or flow_cause(pid, pstate)
          local spec = cjson.decode(redis.call('HGET', KEYS.flows, 's:' .. child))
          flow_cancel_step(now, child, spec, pid, cause)
          ended = true
        elseif redis.call('HINCRBY', KEYS.flows, waiting, -1) <= 0 then
          redis.call('HDEL', KEYS.flows, waiting)
          local spec = cjson.decode(redis.call('HGET', KEYS.flows, 's:' .. child))
          ended = flow_release(now, child, spec) ~= nil
        end
        if ended then
          local more = redis.call('HGET', KEYS.flows, 'd:' .. child)
          if more then work[#work + 1] = {child, 'F', more} end
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
  local deps = redis.call('HMGET', KEYS.flows, unpack(fields))
  for i, id in ipairs(ended) do
    if deps[i] then flow_ended(now, id, final[id].s, deps[i]) end
  end
end

-- Operator's retry of ended step `id` (its record already PENDING again): the steps its
-- ending cancelled wait again, transitively (flow_reopen.lua says when one does).
-- Returns how many steps wait again.
local function flow_reopen(id)
  local spec = redis.call('HGET', KEYS.flows, 's:' .. id)
  if not spec then return 0 end  -- no workflow's step
  redis.call('HDEL', KEYS.flows, 'c:' .. id)
  if redis.call('HEXISTS', KEYS.flows, 'x:' .. cjson.decode(spec).f) == 1 then return 0 end
  local reopened = 0
  local work = {id}
  while #work > 0 do
    local pid = table.remove(work)
    local deps = redis.call('HGET', KEYS.flows, 'd:' .. pid)
    if deps then
      for _, pair in ipairs(cjson.decode(deps)) do
        local child = pair[1]
        if redis.call('HGET', KEYS.flows, 'c:' .. child) == pid then
          local spec = cjson.decode(redis.call('HGET', KEYS.flows, 's:' .. child))
          local raws = flow_hmget(KEYS.records, spec.p)
          local waits, blocked = 0, false
          for i, parent in ipairs(spec.p) do
            local r = raws[i] and decode(parent, raws[i])
            if not raws[i] then
              if redis.call('HEXISTS', KEYS.flows, 'n:' .. parent) == 1 then waits = waits + 1 end
            elseif not r or r.s == 'P' or r.s == 'C' then
              waits = waits + 1
            elseif r.s ~= 'K' and spec.o ~= 'continue' then
              blocked = true
            end
          end
          if not blocked and waits > 0 then
            -- Its cancelled record and error go; it waits, as it did before, for no record.
            redis.call('HDEL', KEYS.records, child)
            redis.call('HDEL', KEYS.results, child)
            redis.call('HDEL', KEYS.progress, child)
            unindex(child)
            redis.call('HDEL', KEYS.flows, 'c:' .. child)
            redis.call('HSET', KEYS.flows, 'n:' .. child, waits)
            -- It reads the outputs kept for its purged parents again (flow_unwait).
            for _, parent in ipairs(spec.p) do
              if redis.call('HEXISTS', KEYS.flows, 'w:' .. parent) == 1 then
                redis.call('HINCRBY', KEYS.flows, 'w:' .. parent, 1)
              end
            end
            reopened = reopened + 1
            work[#work + 1] = child
          end
        end
      end
    end
  end
  return reopened
end
