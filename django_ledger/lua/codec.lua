-- codec.lua: the prelude shared by every ledger script (prepended when loaded).
--
-- Every writing script receives the same KEYS, all with the queue's hash tag:
--   KEYS[1] records (hash)    KEYS[2] ready (zset)      KEYS[3] leases (zset)
--   KEYS[4] gate (string)     KEYS[5] quarantine (hash) KEYS[6] completed (zset)
--   KEYS[7] failed (zset)     KEYS[8] dead (zset)
-- and ARGV[1] = a clock skew in ms (0 outside tests) added to the server clock.
--
-- Record encoding version 1 (records.py and docs/encoding.md hold the same format):
--   1:<ck>:<S>:<due>:<lease>:<attempts>:<fence>:<created>:<updated>:<olen>:<tlen>:<owner><tp><payload>
-- ck = first 8 hex of SHA-1(id .. "\0" .. everything after "1:<ck>:").

local INDEX_OF = {P = 2, C = 3, K = 6, F = 7, D = 8}
local HEADER = '^1:(%x%x%x%x%x%x%x%x):([PCKFD]):(%d+):(%d*):(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):()'

local function server_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
end

-- Decode and verify; nil when the bytes are corrupt (callers never act on them).
local function decode(id, raw)
  local ck, s, due, lease, att, fence, created, updated, olen, tlen, p = string.match(raw, HEADER)
  if not ck then return nil end
  if string.sub(redis.sha1hex(id .. '\0' .. string.sub(raw, 12)), 1, 8) ~= ck then return nil end
  olen = tonumber(olen)
  tlen = tonumber(tlen)
  if p + olen + tlen - 1 > #raw then return nil end
  if (s == 'C') ~= (lease ~= '') then return nil end
  local r = {
    s = s, due = tonumber(due), att = tonumber(att), fence = tonumber(fence),
    created = tonumber(created), updated = tonumber(updated),
    owner = string.sub(raw, p, p + olen - 1),
    tp = string.sub(raw, p + olen, p + olen + tlen - 1),
    payload = string.sub(raw, p + olen + tlen),
  }
  if lease ~= '' then r.lease = tonumber(lease) end
  return r
end

local function encode(id, r)
  local lease = ''
  if r.lease then lease = string.format('%d', r.lease) end
  local body = string.format('%s:%d:%s:%d:%d:%d:%d:%d:%d:', r.s, r.due, lease, r.att, r.fence,
    r.created, r.updated, #r.owner, #r.tp) .. r.owner .. r.tp .. r.payload
  return '1:' .. string.sub(redis.sha1hex(id .. '\0' .. body), 1, 8) .. ':' .. body
end

-- The score a record has in its state's index.
local function score_of(r)
  if r.s == 'P' then return r.due end
  if r.s == 'C' then return r.lease end
  return r.updated
end

-- Remove id from every index; returns how many entries went.
local function unindex(id)
  local n = 0
  for _, k in ipairs({2, 3, 6, 7, 8}) do n = n + redis.call('ZREM', KEYS[k], id) end
  return n
end
