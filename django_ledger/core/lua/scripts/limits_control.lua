-- limits_control.lua: read and set a queue's limits and a key's own (limits_accounting.lua,
-- keyed_claim.lua apply them).
-- KEYS: the standard fourteen (codec.lua).
-- ARGV[1] skew, ARGV[2] op:
--   'read'           ARGV[3] how many keys to describe -> {now, rate_limit, rate_period,
--                    rate_burst, concurrency, source, tokens left (text), slots taken, key,
--                    keys in turn, records due now, claims the limits allow now ('': no
--                    bound), then per key (the first ARGV[3] in turn): key, records due,
--                    slots taken, tokens left ('': no rate)}; '' for what is not set
--   'set'            ARGV[3] rate_limit or '', ARGV[4] rate_period ms, ARGV[5] burst,
--                    ARGV[6] concurrency or '', ARGV[7] source, ARGV[8] '1': write even
--                    over an operator's limits, ARGV[9] key or '' -> {1 written / 0 kept}
--   'keyset'         ARGV[3] key, ARGV[4] rate_limit or '', ARGV[5] rate_period ms,
--                    ARGV[6] burst, ARGV[7] concurrency or '' (all four '': remove),
--                    ARGV[8] source, ARGV[9] '1': write even over an operator's ->
--                    {1 written / 0 kept}: the key's own limits ('L' .. key, keyed_claim.lua)
--   'keylist'        -> {key, rate_limit, rate_period, rate_burst, concurrency, source,
--                    ...}: every key's own limits, '' for a part not set
local now = server_now()
local op = ARGV[2]
local L = limits_read()
local LIMIT_FIELDS = {'rate_limit', 'rate_period', 'rate_burst', 'concurrency', 'source',
  'tokens', 'at', 'key', 'held'}

-- Records due now (the ready index, every band).
local function due_count()
  local n = 0
  local low, earliest, after = next_band('-inf')
  while low do
    if earliest <= now then n = n + redis.call('ZCOUNT', KEYS.ready, exact(low), exact(low + now)) end
    low, earliest, after = next_band(after)
  end
  return n
end

-- Claims of `key` whose records are CLAIMED (read only: keyed_use drops the others).
local function key_taken(key)
  local claims = redis.call('ZRANGEBYLEX', KEYS.keyed, '[c' .. key .. '\0', '(c' .. key .. '\1')
  if #claims == 0 then return 0 end
  local ids = {}
  for k, m in ipairs(claims) do ids[k] = string.sub(m, #key + 3) end
  local n = 0
  for _, raw in ipairs(redis.call('HMGET', KEYS.records, unpack(ids))) do
    if raw and string.sub(raw, 10, 10) == 'C' then n = n + 1 end
  end
  return n
end

if op == 'read' then
  local taken = redis.call('ZCARD', KEYS.leases)
  if not L then return {now, '', '', '', '', '', '', taken, '', 0, due_count(), ''} end
  local out = {now, L.limit or '', L.period or '', L.burst or '', L.conc or '', L.source or ''}
  if not L.key then
    out[7] = L.limit and string.format('%.3f', limits_tokens(L, now)) or ''
    local room = limits_room(L, now)
    out[8], out[9], out[10], out[11] = taken, '', 0, due_count()
    out[12] = room == math.huge and '' or room
    return out
  end
  out[7], out[8], out[9] = '', taken, L.key
  out[10] = redis.call('ZLEXCOUNT', KEYS.keyed, '[r', '(s')
  out[11], out[12] = due_count(), ''
  local turns = redis.call('ZRANGEBYLEX', KEYS.keyed, '[r', '(s', 'LIMIT', 0, tonumber(ARGV[3]))
  for _, head in ipairs(turns) do
    local key = string.sub(head, 18)
    -- Its own limits over the queue's (read only: its claims counted, none dropped).
    local E = keyed_limits(L, L.kl and redis.call('HGET', KEYS.limits, 'L' .. key) or nil)
    local u = keyed_use({limit = E.limit, period = E.period, burst = E.burst}, key, now, {})
    out[#out + 1] = key
    out[#out + 1] = redis.call('ZLEXCOUNT', KEYS.keyed, '[i' .. key .. '\0', '(i' .. key .. '\1')
    out[#out + 1] = E.conc and key_taken(key) or 0
    out[#out + 1] = E.limit and string.format('%.3f', u.left) or ''
  end
  return out
elseif op == 'set' then
  -- Held claims that versions before KEYS.held kept in the keyed pool (under the same 'h'
  -- prefix; never on a queue with a KEY) go at the next write of the limits (a process
  -- writes its settings' limits when it starts); KEYS.held counts only claims made since.
  if not (L and L.key) then redis.call('ZREMRANGEBYLEX', KEYS.keyed, '[h', '(i') end
  if L and L.source == 'operator' and ARGV[8] ~= '1' then return {0} end
  -- The same limits again (every process writes its settings once) change nothing.
  local same = (L and tostring(L.limit or '') == ARGV[3] and tostring(L.conc or '') == ARGV[6]
    and L.source == ARGV[7] and (L.key or '') == ARGV[9] and (ARGV[3] == ''
    or (tostring(L.period) == ARGV[4] and tostring(L.burst) == ARGV[5])))
    or (not L and ARGV[3] == '' and ARGV[6] == '' and ARGV[9] == '')
  if same then return {0} end
  -- The bucket carries over, clamped to the new burst less the held claims; a new rate
  -- starts full. Without a rate (or with a KEY) no held claim is counted.
  local tokens
  if L and L.limit and ARGV[3] ~= '' and not L.key and ARGV[9] == '' then
    tokens = math.max(0, math.min(tonumber(ARGV[5]) - L.held, limits_tokens(L, now)))
  else
    redis.call('DEL', KEYS.held)
  end
  -- The limits' own fields only: the keys' use and the requests' keys (keyed_claim.lua) stay.
  redis.call('HDEL', KEYS.limits, unpack(LIMIT_FIELDS))
  if ARGV[3] ~= '' then
    redis.call('HSET', KEYS.limits, 'rate_limit', ARGV[3], 'rate_period', ARGV[4],
      'rate_burst', ARGV[5])
    if tokens then
      redis.call('HSET', KEYS.limits, 'tokens', string.format('%.17g', tokens), 'at', exact(now),
        'held', L.held)
    end
  end
  if ARGV[6] ~= '' then redis.call('HSET', KEYS.limits, 'concurrency', ARGV[6]) end
  if ARGV[9] ~= '' then redis.call('HSET', KEYS.limits, 'key', ARGV[9]) end
  if ARGV[3] ~= '' or ARGV[6] ~= '' or ARGV[9] ~= '' then
    redis.call('HSET', KEYS.limits, 'source', ARGV[7])
  end
  -- Raised or lifted limits may let a waiting worker claim: wake one when work is due.
  if due_now(now) then wake(now) end
  return {1}
elseif op == 'keyset' then
  local key = ARGV[3]
  local field = 'L' .. key
  local old = redis.call('HGET', KEYS.limits, field)
  if old and string.match(old, ',operator$') and ARGV[9] ~= '1' then return {0} end
  local listed = {}
  for k in string.gmatch(redis.call('HGET', KEYS.limits, 'kl') or '', '[^\n]+') do
    if k ~= key then listed[#listed + 1] = k end
  end
  if ARGV[4] == '' and ARGV[7] == '' then
    if not old then return {0} end
    redis.call('HDEL', KEYS.limits, field)
  else
    local value = table.concat({ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]}, ',')
    if old == value then return {0} end
    redis.call('HSET', KEYS.limits, field, value)
    listed[#listed + 1] = key
    if not old then
      -- A new rate of its own starts full: a bucket kept from the queue's rate goes.
      redis.call('HDEL', KEYS.limits, 'T' .. key, 'A' .. key)
    end
  end
  if #listed > 0 then
    redis.call('HSET', KEYS.limits, 'kl', table.concat(listed, '\n'))
  else
    redis.call('HDEL', KEYS.limits, 'kl')
  end
  -- Raised or lifted limits may let a waiting worker claim: wake one when work is due.
  if due_now(now) then wake(now) end
  return {1}
elseif op == 'keylist' then
  local out = {}
  for key in string.gmatch(redis.call('HGET', KEYS.limits, 'kl') or '', '[^\n]+') do
    local raw = redis.call('HGET', KEYS.limits, 'L' .. key)
    if raw then
      out[#out + 1] = key
      for part in string.gmatch(raw .. ',', '([^,]*),') do out[#out + 1] = part end
    end
  end
  return out
end
return redis.error_reply('unknown limit op ' .. tostring(op))
