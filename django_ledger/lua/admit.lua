-- admit.lua: admit a batch of requests.
-- KEYS: the standard eight (codec.lua).
-- ARGV[1] skew, ARGV[2] max_records, ARGV[3] delay ms, ARGV[4] traceparent ('' for none),
-- ARGV[5..] pairs of request id, payload.
-- Returns {now, code, detail, code, detail, ...} in input order, code:
--   1 admitted, 2 duplicate (detail: stored bytes), 3 conflict (detail: stored bytes),
--   4 full, 5 quarantined, 6 corrupt.
local now = server_now()
local max = tonumber(ARGV[2])
local due = now + tonumber(ARGV[3])
local tp = ARGV[4]
local size = redis.call('HLEN', KEYS[1])
local tplen = #tp
local out = {now}
for i = 5, #ARGV, 2 do
  local id, payload = ARGV[i], ARGV[i + 1]
  local raw = redis.call('HGET', KEYS[1], id)
  local code, detail = 1, ''
  if raw then
    local r = decode(id, raw)
    if not r then
      -- Quarantined ids stay in records so their identity is remembered.
      if redis.call('HEXISTS', KEYS[5], id) == 1 then code = 5 else code = 6 end
    elseif payload_of(r) == payload then
      code, detail = 2, raw
    else
      code, detail = 3, raw
    end
  elseif size >= max then
    code = 4
  else
    -- The record is the truth: written before the index, so a lost index write
    -- leaves a record that repair re-indexes, never an index without a record.
    redis.call('HSET', KEYS[1], id, encode(id, {
      s = 'P', due = due, att = 0, fence = 0, created = now, updated = now,
      owner = '', tlen = tplen, tail = tp .. payload}))
    redis.call('ZADD', KEYS[2], due, id)
    size = size + 1
  end
  out[#out + 1] = code
  out[#out + 1] = detail
end
return out
