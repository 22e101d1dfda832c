-- progress.lua: store the progress documents of running claims (core/progress.py).
-- KEYS: the standard list (codec.lua); writes KEYS.progress only.
-- ARGV[1] skew, then three per item: request id, fence, document (a JSON object's text
-- without its opening brace's first field: '{"done":...}' as core/progress.py encodes it).
-- Each item is written only while the record is CLAIMED under exactly that fence and
-- its lease runs: a stale run (an older fence: its claim lost, repaired, cancelled or
-- settled since) is refused, so it never overwrites what a newer run reported.
-- The stored value leads with the server's "at" and the record's "fence".
-- Returns {code, reason, ...} per item: 1 written, 0 refused (reason: missing, corrupt,
-- superseded, not_claimed, lease_expired).
local now = server_now()
local out, writes = {}, {}
for i = 2, #ARGV, 3 do
  local id, fence, doc = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2]
  local raw = redis.call('HGET', KEYS.records, id)
  local r = raw and decode(id, raw)
  local code, reason = 0, ''
  if not raw then
    reason = 'missing'
  elseif not r then
    reason = 'corrupt'
  elseif r.fence ~= fence then
    reason = 'superseded'
  elseif r.s ~= 'C' then
    reason = 'not_claimed'
  elseif now >= r.lease then
    reason = 'lease_expired'
  else
    code = 1
    writes[#writes + 1] = id
    writes[#writes + 1] = '{"at":' .. string.format('%d', now) .. ',"fence":'
      .. string.format('%d', fence) .. ',' .. string.sub(doc, 2)
  end
  out[#out + 1] = code
  out[#out + 1] = reason
end
if #writes > 0 then redis.call('HSET', KEYS.progress, unpack(writes)) end
return out
