-- import_records.lua: write a batch of records exactly as given (offline migration).
-- KEYS: the standard list (codec.lua).
-- ARGV[1] skew, ARGV[2] max records, ARGV[3..] pairs of id, encoded bytes.
-- Returns {-2} while the gate is open (nothing written), else one code and detail per
-- pair: 1 written, 2 the id exists (detail: stored bytes, the caller compares),
-- 4 full, 6 the given bytes do not decode (nothing written), 7 a workflow's waiting step
-- holds the id (workflows.lua).
-- The gate is checked here, atomically with the writes: imports only run offline.
if redis.call('EXISTS', KEYS.gate) == 0 then return {-2} end
local max = tonumber(ARGV[2])
local size = live_count()
local out, due = {}, false
for i = 3, #ARGV, 2 do
  local id, raw = ARGV[i], ARGV[i + 1]
  local old = redis.call('HGET', KEYS.records, id)
  local code, detail = 1, ''
  if old then
    code, detail = 2, old
  elseif redis.call('HEXISTS', KEYS.flows, 'n:' .. id) == 1 then
    code = 7
  else
    local r = decode(id, raw)
    local live = r and not string.find('KFD', r.s, 1, true)
    if not r then
      code = 6
    elseif live and size >= max then
      code = 4  -- only live records make a queue full
    else
      redis.call('HSET', KEYS.records, id, raw)
      redis.call('ZADD', index_of(r.s), score_of(r), id)
      if live then size = size + 1 end
      due = due or r.s == 'P'
    end
  end
  out[#out + 1] = code
  out[#out + 1] = detail
end
-- Imported PENDING records: an idle worker wakes to claim them or learn when they fall due.
if due then wake(server_now()) end
return out
