-- limits_read.lua: a queue's limits as a call reads them (limits_accounting.lua describes the
-- fields of KEYS.limits), shared by settle.lua (a settlement that frees a slot wakes a
-- worker) and the claims (before limits_accounting.lua in the library).

-- The queue's limits, or nil when it has none (one HMGET).
local function limits_read()
  local f = redis.call('HMGET', KEYS.limits, 'rate_limit', 'rate_period', 'rate_burst',
    'concurrency', 'tokens', 'at', 'source', 'key', 'held', 'kl')
  if not f[1] and not f[4] and not f[8] then return nil end
  return {
    limit = tonumber(f[1]), period = tonumber(f[2]), burst = tonumber(f[3]),
    conc = tonumber(f[4]), tokens = tonumber(f[5]), at = tonumber(f[6]), source = f[7],
    key = f[8], held = tonumber(f[9]) or 0, kl = f[10],
  }
end

-- The tokens in the bucket at `now`: refilled since `at`, never past the burst less the
-- claims held when it was written (a held claim's start is still to come: its token and
-- the bucket together stay within the burst).
local function limits_tokens(L, now)
  local cap = L.burst - L.held
  if not L.at then return cap end
  local t = L.tokens + math.max(0, now - L.at) * L.limit / L.period
  if t > cap then t = cap end
  return t
end

-- How many records the limits let be claimed at `now` (math.huge: no bound); sets
-- L.left, the tokens before this call's claims.
local function limits_room(L, now)
  local room = math.huge
  if L.conc then
    L.claimed = redis.call('ZCARD', KEYS.leases)
    room = math.max(0, L.conc - L.claimed)
  end
  if L.limit then
    L.left = limits_tokens(L, now)
    -- A hair above the floor: refill arithmetic may leave 2.9999999 for 3.
    room = math.min(room, math.floor(L.left + 1e-9))
  end
  return room
end
