-- flow_admit.lua: admit a whole workflow in one step, idempotent by its id (workflows.lua).
-- KEYS: the standard list (codec.lua).
-- ARGV[1] skew, ARGV[2] max records, ARGV[3] workflow id, ARGV[4] its manifest, then five
-- per step: step id, payload ('' for a step that waits), spec, dependants ('' none), how
-- many parents it waits for (0: a root, admitted PENDING and due now).
-- Returns {now, code, detail}: 1 admitted, 2 duplicate (the same manifest is stored),
-- 3 conflict (detail: 'workflow_differs', or the id of a step already in the queue),
-- 4 full (the live records and this workflow's steps would pass max records).
local now = server_now()
local flow, manifest = ARGV[3], ARGV[4]
local stored = redis.call('HGET', KEYS.flows, 'm:' .. flow)
if stored then
  if stored == manifest then return {now, 2, ''} end
  return {now, 3, 'workflow_differs'}
end
local ids, specs = {}, {}
for i = 5, #ARGV, 5 do
  ids[#ids + 1] = ARGV[i]
  specs[#specs + 1] = 's:' .. ARGV[i]
end
-- Every step id is new: no record and no other workflow's step under it.
local records, taken = flow_hmget(KEYS.records, ids), flow_hmget(KEYS.flows, specs)
for k, id in ipairs(ids) do
  if records[k] or taken[k] then return {now, 3, id} end
end
-- Every step counts, waiting or not: all of them become records in time.
if live_count() + #ids > tonumber(ARGV[2]) then return {now, 4, ''} end
-- The workflow's entries first, then the roots' records, then their index.
local fields, roots, index = {'m:' .. flow, manifest, 'k:' .. flow, #ids}, {}, {}
for i = 5, #ARGV, 5 do
  local id = ARGV[i]
  fields[#fields + 1] = 's:' .. id
  fields[#fields + 1] = ARGV[i + 2]
  if ARGV[i + 3] ~= '' then
    fields[#fields + 1] = 'd:' .. id
    fields[#fields + 1] = ARGV[i + 3]
  end
  if ARGV[i + 4] ~= '0' then
    fields[#fields + 1] = 'n:' .. id
    fields[#fields + 1] = ARGV[i + 4]
  else
    local r = {s = 'P', due = now, att = 0, fence = 0, created = now, updated = now,
      owner = '', tlen = 0, tail = ARGV[i + 1], prio = 0}
    roots[#roots + 1] = id
    roots[#roots + 1] = encode(id, r)
    index[#index + 1] = score_of(r)
    index[#index + 1] = id
  end
end
for i = 1, #fields, 2 * FLOW_CHUNK do
  redis.call('HSET', KEYS.flows, unpack(fields, i, math.min(i + 2 * FLOW_CHUNK - 1, #fields)))
end
for i = 1, #roots, 2 * FLOW_CHUNK do
  redis.call('HSET', KEYS.records, unpack(roots, i, math.min(i + 2 * FLOW_CHUNK - 1, #roots)))
end
for i = 1, #index, 2 * FLOW_CHUNK do
  redis.call('ZADD', KEYS.ready, unpack(index, i, math.min(i + 2 * FLOW_CHUNK - 1, #index)))
end
if #roots > 0 then wake(now) end
return {now, 1, ''}
