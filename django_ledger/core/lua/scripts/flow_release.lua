-- flow_release.lua: the release (workflows.lua) after an operator's compare-and-set
-- (mark_failed) ended record ARGV[2]: move that step's waiting dependants on, as the
-- fused scripts do in the settling call itself.
-- KEYS: the standard list (codec.lua). ARGV[1] skew, ARGV[2] request id.
-- Returns 1 if the record is a step that has ended, else 0.
local now = server_now()
local id = ARGV[2]
local raw = redis.call('HGET', KEYS.records, id)
local r = raw and decode(id, raw)
if not r or not string.find('KFD', r.s, 1, true) then return 0 end
flow_settled(now, {id}, {[id] = r})
return 1
