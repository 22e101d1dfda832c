-- limits.lua: a queue's flow limits, held in the claim (prepended after ops.lua, and
-- before limit.lua). KEYS[12] is the queue's limits hash:
--   rate_limit, rate_period (ms), rate_burst  a token bucket: rate_limit tokens each
--                     rate_period ms, at most rate_burst kept; one token per claim
--   concurrency       at most this many records CLAIMED at once (the leases index)
--   source            'settings' or 'operator': who wrote the limits
--   tokens, at        the bucket as of `at` (server ms); absent: full
--   key               the KEY setting: the limits hold per key, keys take turns (keyed.lua)
-- No field: no limit. docs/limits.md describes the model.

-- keyed.lua (prepended after this file) sets it: claim_limited for a queue with a KEY.
local keyed_claim

-- The queue's limits, or nil when it has none (one HMGET).
local function limits_read()
  local f = redis.call('HMGET', KEYS[12], 'rate_limit', 'rate_period', 'rate_burst',
    'concurrency', 'tokens', 'at', 'source', 'key')
  if not f[1] and not f[4] and not f[8] then return nil end
  return {
    limit = tonumber(f[1]), period = tonumber(f[2]), burst = tonumber(f[3]),
    conc = tonumber(f[4]), tokens = tonumber(f[5]), at = tonumber(f[6]), source = f[7],
    key = f[8],
  }
end

-- The tokens in the bucket at `now`: refilled since `at`, never past the burst.
local function limits_tokens(L, now)
  if not L.at then return L.burst end
  local t = L.tokens + math.max(0, now - L.at) * L.limit / L.period
  if t > L.burst then t = L.burst end
  return t
end

-- How many records the limits let be claimed at `now` (math.huge: no bound); sets
-- L.left, the tokens before this call's claims.
local function limits_room(L, now)
  local room = math.huge
  if L.conc then room = math.max(0, L.conc - redis.call('ZCARD', KEYS[3])) end
  if L.limit then
    L.left = limits_tokens(L, now)
    -- A hair above the floor: refill arithmetic may leave 2.9999999 for 3.
    room = math.min(room, math.floor(L.left + 1e-9))
  end
  return room
end

-- Spend a token per claim made (nothing is written when none was made: the bucket
-- refills from `at` lazily).
local function limits_spend(L, now, got)
  if not L.limit or got <= 0 then return end
  L.left = L.left - got
  redis.call('HSET', KEYS[12], 'tokens', string.format('%.17g', L.left), 'at', exact(now))
end

-- When the limits let the next claim be made, after this call's: -1 while every slot is
-- taken (a settlement that frees one wakes a worker), else when the next token is due.
local function limits_next(L, now)
  if L.conc and redis.call('ZCARD', KEYS[3]) >= L.conc then return -1 end
  if not L.limit then return -1 end
  local short = 1 - (L.left or limits_tokens(L, now))
  if short <= 0 then return now end
  return now + math.max(1, math.ceil(short * L.period / L.limit))
end

-- claim_due (ops.lua) under the queue's limits, same arguments and answers. A limited
-- queue holds no prefetched claims: a held claim would sit on a slot or a token it does
-- not use, so a call takes at most `start` records. When the limits stop this call while
-- more is due, no other worker could take it either: the wake key goes, and the answer
-- is when the limits let the next claim be made (-1: a freed slot will wake one).
local function claim_limited(now, owner, lease, limit, out, start)
  local L = limits_read()
  if not L then return claim_due(now, owner, lease, limit, out, start) end
  if L.key then return keyed_claim(L, now, owner, lease, limit, out, start) end
  if start and start < limit then limit = start end
  local room = limits_room(L, now)
  local take = math.min(limit, room)
  -- take 0 claims none; it still checks the gate and passes a wake-up on when it may.
  local got, next_at = claim_due(now, owner, lease, take, out, nil)
  limits_spend(L, now, got)
  if got >= room and next_at == now then
    redis.call('DEL', KEYS[11])
    next_at = limits_next(L, now)
  end
  return got, next_at
end
