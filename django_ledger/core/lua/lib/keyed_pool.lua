-- keyed_pool.lua: the keyed pool's entries (KEYS.keyed and the '@' .. id and 'R' .. key
-- fields of KEYS.limits, keyed_claim.lua describes them), before keyed_claim.lua in the
-- library; admit.lua stores each admitted request's key with them and brings those due now
-- into the pool.

local KEYED_OFFSET = 4503599627370496  -- 2^52: every ready score plus it is positive

local function keyed_digits(n)
  return string.format('%016.0f', n)
end

-- Put `key` at the back of the turns; `old` its turn now (nil: it has none).
local function keyed_back(key, old)
  local turn = keyed_digits(redis.call('HINCRBY', KEYS.limits, 'turn', 1))
  if old then redis.call('ZREM', KEYS.keyed, 'r' .. old .. key) end
  redis.call('ZADD', KEYS.keyed, 0, 'r' .. turn .. key)
  redis.call('HSET', KEYS.limits, 'R' .. key, turn)
end

-- Bring due PENDING records (ids, their ready scores) into the pool under their keys
-- (a record admitted with no key stored has key ''); a key new to the turns goes last.
local function keyed_add(ids, scores)
  local fields = {}
  for k, id in ipairs(ids) do fields[k] = '@' .. id end
  local keys = redis.call('HMGET', KEYS.limits, unpack(fields))
  local members, fresh, seen = {}, {}, {}
  for k, id in ipairs(ids) do
    local key = keys[k] or ''
    members[#members + 1] = 0
    members[#members + 1] = 'i' .. key .. '\0' .. keyed_digits(tonumber(scores[k]) + KEYED_OFFSET) .. id
    if not seen[key] then
      seen[key] = true
      fresh[#fresh + 1] = key
    end
  end
  redis.call('ZADD', KEYS.keyed, unpack(members))
  local turns = {}
  for k, key in ipairs(fresh) do turns[k] = 'R' .. key end
  turns = redis.call('HMGET', KEYS.limits, unpack(turns))
  for k, key in ipairs(fresh) do
    if not turns[k] then keyed_back(key, nil) end
  end
end

-- Store the keys of records just admitted (pairs id, key) and bring those due now into
-- the pool (`score`: their ready score, `due`: their due time).
local function keyed_admitted(pairs, score, due, now)
  redis.call('HSET', KEYS.limits, unpack(pairs))
  if due > now then return end  -- keyed_promote brings it in when it falls due
  local ids, scores = {}, {}
  for k = 1, #pairs, 2 do
    ids[#ids + 1] = string.sub(pairs[k], 2)
    scores[#scores + 1] = score
  end
  keyed_add(ids, scores)
end
