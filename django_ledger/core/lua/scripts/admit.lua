-- admit.lua: admit a batch of requests.
-- KEYS: the standard list (codec.lua).
-- ARGV[1] skew, ARGV[2] max_records, ARGV[3] delay ms, ARGV[4] traceparent ('' for none),
-- ARGV[5] priority (-100..100), ARGV[6..] pairs of request id, payload; in a queue with
-- a KEY (keyed_claim.lua) ARGV[6] is '' and triples of request id, payload, key follow.
-- Returns {now, code, detail, code, detail, ...} in input order, code:
--   1 admitted, 2 duplicate (detail: stored bytes), 3 conflict (detail: stored bytes),
--   4 full (live records at max_records), 5 quarantined, 6 corrupt,
--   7 the id holds a control character (checked here too, for callers other than ours),
--   8 a workflow's waiting step holds the id (workflows.lua): only its release writes it.
local now = server_now()
local max = tonumber(ARGV[2])
local due = now + tonumber(ARGV[3])
local tp = ARGV[4]
local prio = tonumber(ARGV[5])
-- Live records, counted when a new id first needs room (a batch of repeats never does).
local size
local ids, first, step = {}, 6, 2
if ARGV[6] == '' then first, step = 7, 3 end  -- '' is no request id: ids are never empty
for i = first, #ARGV, step do ids[#ids + 1] = ARGV[i] end
-- One read for the whole batch; ids admitted earlier in this batch are in `fresh`.
local stored = redis.call('HMGET', KEYS.records, unpack(ids))
-- Ids that a workflow's waiting step holds have no record yet, and are not free: one
-- HMGET of the flows hash for the batch's new ids, only in a queue that has workflows.
local held = {}
if redis.call('EXISTS', KEYS.flows) == 1 then
  local fields, at = {}, {}
  for k, id in ipairs(ids) do
    if not stored[k] then
      fields[#fields + 1] = 'n:' .. id
      at[#at + 1] = k
    end
  end
  if #fields > 0 then
    local found = redis.call('HMGET', KEYS.flows, unpack(fields))
    for j, k in ipairs(at) do held[k] = found[j] ~= false end
  end
end
local fresh, records, index, keyed = {}, {}, {}, {}
local out = {now}
for k, id in ipairs(ids) do
  local payload = ARGV[first + step * (k - 1) + 1]
  local raw = fresh[id] or stored[k]
  local code, detail = 1, ''
  -- Every control character has_control knows starts with one of these bytes: one scan
  -- clears an ordinary id.
  if string.find(id, '[%z\1-\31\127\194\226]') and has_control(id) then
    code = 7
  elseif raw then
    local r = decode(id, raw)
    if not r then
      -- Quarantined ids stay in records so their identity is remembered.
      if redis.call('HEXISTS', KEYS.quarantine, id) == 1 then code = 5 else code = 6 end
    elseif payload_of(r) == payload then
      code, detail = 2, raw
    else
      code, detail = 3, raw
    end
  elseif held[k] then
    code = 8
  else
    size = size or live_count()
    if size >= max then
      code = 4
    else
      local r = {
        s = 'P', due = due, att = 0, fence = 0, created = now, updated = now,
        owner = '', tlen = #tp, tail = (tp == '' and payload) or tp .. payload, prio = prio}
      raw = encode(id, r)
      fresh[id] = raw
      records[#records + 1] = id
      records[#records + 1] = raw
      index[#index + 1] = score_of(r)
      index[#index + 1] = id
      if step == 3 then
        keyed[#keyed + 1] = '@' .. id
        keyed[#keyed + 1] = ARGV[first + step * (k - 1) + 2]
      end
      size = size + 1
    end
  end
  out[#out + 1] = code
  out[#out + 1] = detail
end
-- The records are the truth and go first: if the index write were lost, repair would
-- rebuild it from them; an index entry without its record is never left behind.
if #records > 0 then
  redis.call('HSET', KEYS.records, unpack(records))
  redis.call('ZADD', KEYS.ready, unpack(index))
  if #keyed > 0 then keyed_admitted(keyed, index[1], due, now) end
  -- An idle worker wakes: to claim what is due now, or to learn when this falls due.
  wake(due)
end
return out
