-- limits_accounting.lua: a queue's flow limits as the claims spend them: tokens, held
-- (prefetched) claims, when the next claim may be made. Read by claiming.lua's
-- claim_limited (after limits_read.lua). KEYS.limits is the queue's limits hash:
--   rate_limit, rate_period (ms), rate_burst  a token bucket: rate_limit tokens each
--                     rate_period ms, at most rate_burst kept; one token per claim
--   concurrency       at most this many records CLAIMED at once (the leases index)
--   source            'settings' or 'operator': who wrote the limits
--   tokens, at        the bucket as of `at` (server ms); absent: full
--   held              the held claims counted when the bucket was last written: the
--                     bucket keeps at most rate_burst - held tokens (the prefetch rule)
--   key               the KEY setting: the limits hold per key, keys take turns (keyed_claim.lua)
--   kl                the keys with limits of their own ('L' .. key, keyed_claim.lua), one a
--                     line; absent: none
-- No field: no limit. docs/limits.md describes the model.
-- Under a RATE, KEYS.held holds 'h' .. id for each claim taken held (prefetched): the held
-- claims whose tokens are spent and whose work has not started (limits_held).

-- The held claims of a rate-limited queue: how many entries KEYS.held keeps ('h' .. id).
-- An entry whose claim started or ended by another path than settle_claim.lua stays
-- until checked: `check` true checks each against its record (still CLAIMED and held)
-- and drops the rest. Counting too many only lowers the bucket's ceiling.
local function limits_held(check)
  if not check then return redis.call('ZLEXCOUNT', KEYS.held, '[h', '(i') end
  local members = redis.call('ZRANGEBYLEX', KEYS.held, '[h', '(i')
  if #members == 0 then return 0 end
  local ids = {}
  for k, m in ipairs(members) do ids[k] = string.sub(m, 2) end
  local stale, n = {}, 0
  for k, raw in ipairs(redis.call('HMGET', KEYS.records, unpack(ids))) do
    -- Version 3, CLAIMED, flags 1 (codec.lua's layout): still held.
    if raw and string.byte(raw, 1) == 51 and string.sub(raw, 10, 10) == 'C'
        and string.byte(raw, 63) == 1 then
      n = n + 1
    else
      stale[#stale + 1] = members[k]
    end
  end
  if #stale > 0 then redis.call('ZREM', KEYS.held, unpack(stale)) end
  return n
end

-- The claims settled by settle_claim.lua (ARGV[first], ARGV[first + 6], ..., the target
-- at +3; their answers' codes at out[code], out[code + 2], ...): a settlement applied
-- (or replayed) other than a renewal ('C') ends a held claim's wait, so its entry goes.
-- A lost one leaves it: the record may be held by a newer claim.
local function limits_settled(L, first, last, out, code)
  -- None counted when the bucket was last written: none exists (entries are added only
  -- by a call that writes the count).
  if not L or not L.limit or L.key or L.held == 0 or last < first then return end
  local members = {}
  for i = first, last, 6 do
    if ARGV[i + 3] ~= 'C' and out[code] ~= 0 then members[#members + 1] = 'h' .. ARGV[i] end
    code = code + 2
  end
  if #members > 0 then redis.call('ZREM', KEYS.held, unpack(members)) end
end

-- Spend a token per claim made (nothing is written when none was made and the held
-- claims' count did not move: the bucket refills from `at` lazily). `held`: the held
-- claims counted now, and this call's held claims among them.
local function limits_spend(L, now, got, held)
  if not L.limit or (got <= 0 and (held or L.held) == L.held) then return end
  L.left = L.left - got
  if held then L.held = held end
  redis.call('HSET', KEYS.limits, 'tokens', string.format('%.17g', L.left), 'at', exact(now),
    'held', L.held)
end

-- How many claims beyond the `starts` this call starts it may take held (prefetched):
-- only from headroom, so a held claim never takes what another worker could start now.
-- CONCURRENCY: the claimed records, held ones included, stay within half the limit.
-- RATE: the bucket keeps at least half the burst after them, and a held claim's token
-- stays counted (L.held, the bucket's ceiling) until its work starts. Sets L.held to the
-- held claims counted now (entries checked when some may be stale, or when the rate
-- stopped this call). Call after limits_room, with L.left set.
local function limits_extra(L, want, starts, stopped)
  local extra = want - starts
  if L.conc then extra = math.min(extra, math.floor(L.conc / 2) - L.claimed - starts) end
  if L.limit then
    local n = L.held > 0 and limits_held(false) or 0
    if n > 0 and (stopped or n > redis.call('ZCARD', KEYS.leases)) then n = limits_held(true) end
    L.counted = n
    extra = math.min(extra, math.floor(L.left - starts - L.burst / 2 + 1e-9))
  end
  return math.max(0, extra)
end

-- Count this call's held claims (out from `from` on, seven fields a claim, held last)
-- under KEYS.held; answer the held claims counted now.
local function limits_hold(L, out, from)
  if not L.limit then return nil end
  local members = {}
  for k = from, #out, 7 do
    if out[k + 6] == 1 then
      members[#members + 1] = 0
      members[#members + 1] = 'h' .. out[k]
    end
  end
  if #members > 0 then redis.call('ZADD', KEYS.held, unpack(members)) end
  return L.counted + #members / 2
end

-- When the limits let the next claim be made, after this call's: -1 while every slot is
-- taken (a settlement that frees one wakes a worker), else when the next token is due.
local function limits_next(L, now)
  if L.conc and redis.call('ZCARD', KEYS.leases) >= L.conc then return -1 end
  if not L.limit then return -1 end
  local short = 1 - (L.left or limits_tokens(L, now))
  if short <= 0 then return now end
  return now + math.max(1, math.ceil(short * L.period / L.limit))
end
