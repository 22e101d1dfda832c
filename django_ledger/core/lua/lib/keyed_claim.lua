-- keyed_claim.lua: limits per key of a task's arguments, and fair share among the keys
-- (after limits_accounting.lua and keyed_pool.lua, the pool's entries, in the library). A queue whose
-- limits hash (KEYS.limits) holds `key` (its KEY setting, e.g. 'kwargs.tenant_id') applies
-- its RATE and CONCURRENCY to each key apart, and its claims take the keys in turn: one
-- claim per key per turn, so a key with a million due records does not delay one with ten.
-- The admission (Python) computes each request's key and stores it in KEYS.limits as
-- '@' .. id (admit.lua). KEYS.keyed, the keyed pool, is a sorted set read by lex range
-- (every score 0) holding:
--   'i' .. key .. '\0' .. SCORE .. id   a due PENDING record of key; SCORE its ready score
--                                       plus KEYED_OFFSET, 16 digits (the key's own order)
--   'r' .. TURN .. key                  a key with records in the pool, by turn (16 digits)
--   'c' .. key .. '\0' .. id            a claim of key, kept under a CONCURRENCY and
--                                       checked against the record each time it is counted
--   'z' .. AT .. STEP .. key            a key that left the turns with state of its own (its
--                                       claims, its bucket): looked at from AT (16 digits,
--                                       server ms) by keyed_sweep, which drops what no longer
--                                       matters; STEP (one digit) doubles the wait for a key
--                                       whose claims still run. A key is in the turns only
--                                       while it has due records in the pool, so neither the
--                                       turns nor the state grow with the keys ever seen.
-- More KEYS.limits fields: 'R' .. key (the key's turn now), 'T' .. key and 'A' .. key (its
-- bucket: tokens as of server ms), 'turn' (the last turn given), 'wm' (how far, in due
-- ms, the ready index has been brought into the pool),
-- 'L' .. key (the key's own limits: 'rate_limit,rate_period,rate_burst,concurrency,source',
-- '' for a part not set, which the queue's number fills) and 'kl' (the keys with limits of
-- their own, one a line: read with the queue's limits, so a queue with none pays nothing).
-- The ready index stays whole and authoritative: the pool is derived from it and from the
-- records. A due record enters the pool from the ready index (keyed_promote, each claim),
-- so what settlements, releases and repair give back comes into its key's turn with no
-- code of theirs; a pool entry whose record moved on is dropped when met.

local KEYED_PAGE = 1024  -- ready entries brought into the pool per call at most

-- Bring what fell due since the last call from the ready index into the pool. A pool
-- with no key in turn looks from the start: a due record it missed (put back in the ready
-- index by hand) comes in then.
local function keyed_promote(now)
  local wm = tonumber(redis.call('HGET', KEYS.limits, 'wm') or '0')
  if not redis.call('ZRANGEBYLEX', KEYS.keyed, '[r', '(s', 'LIMIT', 0, 1)[1] then wm = 0 end
  local mark = now
  local low, earliest, after = next_band('-inf')
  while low do
    if earliest <= now then
      local got = redis.call('ZRANGEBYSCORE', KEYS.ready, exact(low + math.max(wm, earliest)),
        exact(low + now), 'WITHSCORES', 'LIMIT', 0, KEYED_PAGE)
      local ids, scores = {}, {}
      for k = 1, #got, 2 do
        ids[#ids + 1] = got[k]
        scores[#scores + 1] = got[k + 1]
      end
      if #ids > 0 then keyed_add(ids, scores) end
      -- A full page: the next call goes on from its last score (inclusive: ZADD of a
      -- member already there changes nothing).
      if #ids == KEYED_PAGE then mark = math.min(mark, tonumber(scores[#scores]) - low) end
    end
    low, earliest, after = next_band(after)
  end
  redis.call('HSET', KEYS.limits, 'wm', exact(mark))
end

-- The limits of a key: its own ('L' .. key, `raw`) over the queue's L, part by part (a
-- rate of its own replaces the queue's rate whole).
local function keyed_limits(L, raw)
  if not raw then return L end
  local limit, period, burst, conc = string.match(raw, '^([^,]*),([^,]*),([^,]*),([^,]*)')
  local E = {limit = L.limit, period = L.period, burst = L.burst, conc = L.conc}
  if limit and limit ~= '' then
    E.limit, E.period, E.burst = tonumber(limit), tonumber(period), tonumber(burst)
  end
  if conc and conc ~= '' then E.conc = tonumber(conc) end
  return E
end

-- The use of `key` under its limits at `now`, read once a call (`cache`): u.L its limits
-- (keyed_limits), u.taken its claims now, u.left its tokens. Its own limits come in the
-- HMGET that reads its bucket (no command more). Claims of the key whose records left
-- CLAIMED (settled, given back, reclaimed by repair after a lease ran out) are dropped
-- here: their slot is free by construction.
-- The ids of `key`'s claims that still hold a slot; the other claims' entries leave the
-- pool. The state letter (offset 9) is enough: a claim is a slot while its record is
-- CLAIMED, and a record keeps its key.
local function keyed_held(key)
  local claims = redis.call('ZRANGEBYLEX', KEYS.keyed, '[c' .. key .. '\0', '(c' .. key .. '\1')
  local held, gone = {}, {}
  if #claims == 0 then return held end
  local ids = {}
  for k, m in ipairs(claims) do ids[k] = string.sub(m, #key + 3) end
  local raws = redis.call('HMGET', KEYS.records, unpack(ids))
  for k = 1, #claims do
    if raws[k] and string.sub(raws[k], 10, 10) == 'C' then
      held[#held + 1] = ids[k]
    else
      gone[#gone + 1] = claims[k]
    end
  end
  if #gone > 0 then redis.call('ZREM', KEYS.keyed, unpack(gone)) end
  return held
end

local function keyed_use(L, key, now, cache)
  local u = cache[key]
  if u then return u end
  u = {taken = 0, L = L}
  local b
  if L.kl then
    b = redis.call('HMGET', KEYS.limits, 'T' .. key, 'A' .. key, 'L' .. key)
    u.L = keyed_limits(L, b[3])
  elseif L.limit then
    b = redis.call('HMGET', KEYS.limits, 'T' .. key, 'A' .. key)
  end
  local E = u.L
  if E.conc then u.taken = #keyed_held(key) end
  if E.limit then
    if not b then b = redis.call('HMGET', KEYS.limits, 'T' .. key, 'A' .. key) end
    u.left = E.burst
    if b[2] then
      u.left = math.min(E.burst, tonumber(b[1]) + math.max(0, now - tonumber(b[2])) * E.limit / E.period)
    end
  end
  cache[key] = u
  return u
end

-- When a key's bucket is full again (bucket `T` tokens as of `A`), under limits E.
local function keyed_full_at(E, T, A)
  return A + math.ceil((E.burst - T) * E.period / E.limit)
end

-- A 'z' entry: look at `key` from `at`, after waiting `step` times.
local function keyed_look(at, step, key)
  return 'z' .. keyed_digits(at) .. string.char(48 + step) .. key
end

-- Look at up to `n` keys whose 'z' entries are due: a key out of the turns keeps its claims
-- while their records are CLAIMED (looked at again after 500 ms, then twice as long each
-- time up to about two minutes, never after the last lease ends: a settlement is seen
-- soon, and a long task costs a few looks) and its bucket until it is full (a missing bucket is a full one); the rest
-- of its state goes. A key back in the turns is left to its visits, and gets an entry
-- when it leaves again.
local function keyed_sweep(L, now, n)
  local due = redis.call('ZRANGEBYLEX', KEYS.keyed, '[z', '(z' .. keyed_digits(now + 1),
    'LIMIT', 0, n)
  if #due == 0 then return end
  redis.call('ZREM', KEYS.keyed, unpack(due))
  local again, seen = {}, {}
  for _, entry in ipairs(due) do
    local key, step = string.sub(entry, 19), string.byte(entry, 18) - 48
    if not seen[key] then
      seen[key] = true
      local f = redis.call('HMGET', KEYS.limits, 'R' .. key, 'T' .. key, 'A' .. key, 'L' .. key)
      if not f[1] then
        local at, running = 0, 0
        local held = keyed_held(key)
        if #held > 0 then
          -- A slot until its record leaves CLAIMED (a settlement, or repair after its
          -- lease): looked at again soon, then less often, never after the lease ends.
          for _, id in ipairs(held) do
            local lease = tonumber(redis.call('ZSCORE', KEYS.leases, id) or '0')
            running = math.max(running, lease > now and lease + 1 or 0)
          end
          local wait = now + 250 * 2 ^ (step + 1)
          at = running > now and math.min(running, wait) or wait
          step = math.min(step + 1, 9)
        end
        if f[3] then
          local E = keyed_limits(L, L.kl and f[4] or nil)
          local full = E.limit and keyed_full_at(E, tonumber(f[2]), tonumber(f[3]))
          if full and full > now then
            at = math.max(at, full)
          else
            redis.call('HDEL', KEYS.limits, 'T' .. key, 'A' .. key)
          end
        end
        if at > 0 then
          again[#again + 1] = 0
          again[#again + 1] = keyed_look(at, step, key)
        end
      end
    end
  end
  if #again > 0 then redis.call('ZADD', KEYS.keyed, unpack(again)) end
end

-- How many claims of the key its limits allow now.
local function keyed_room(L, u)
  local room = math.huge
  if L.conc then room = L.conc - u.taken end
  if L.limit then room = math.min(room, math.floor(u.left + 1e-9)) end
  return room
end

-- When a key held by its limits may claim again: -1 when a slot is what it waits for (a
-- settlement frees it), else when its next token is due.
local function keyed_next(L, u, now)
  if L.conc and u.taken >= L.conc then return -1 end
  return now + math.max(1, math.ceil((1 - u.left) * L.period / L.limit))
end

-- Take up to `take` records from the pool, the keys in turn, each within its key's limits;
-- `claim(ids)` claims (or picks) the due records among ids and answers the set of those
-- it did. Returns the claims made, and when the next claim may be made: now (more may be
-- claimable: the wake key stays), -1 (nothing is, until a settlement frees a slot or work
-- is admitted), or a time (the next token of a key held by its rate, or the next record
-- to fall due). The turns are read in pages and written once a call: keys visited go to the
-- back in the order visited, so a call that visits a key twice has been round them all.
-- The picks after the first `starts` (nil: all start) are held claims: taken only while
-- the key's claims, held ones included, stay within half its CONCURRENCY (limits_accounting.lua's
-- headroom rule, per key); a queue with a RATE per key asks for none.
local function keyed_take(L, now, take, claim, starts)
  starts = starts or take
  local refused = 0
  keyed_promote(now)
  keyed_sweep(L, now, take * 2 + 16)
  local size = redis.call('ZLEXCOUNT', KEYS.keyed, '[r', '(s')
  local budget = take * 4 + 64
  -- The turns, read in pages as the call goes: `ring` holds the keys in turn order, read
  -- so far; `again` the keys this call visited, for their next turn after all of those.
  local reach, ring, again = math.min(size, budget), {}, {}
  local function read_turns()
    local page = redis.call('ZRANGEBYLEX', KEYS.keyed, '[r', '(s', 'LIMIT', #ring,
      math.min(reach - #ring, take + 8))
    for _, head in ipairs(page) do
      ring[#ring + 1] = {string.sub(head, 2, 17), string.sub(head, 18)}
    end
    return #page > 0
  end
  read_turns()
  local got, held, pos, rpos, cache, wait = 0, 0, 1, 1, {}, nil
  -- Records read per key at a time: what this call may take of each key in turn.
  local per = math.ceil(take / math.max(1, math.min(size, take)))
  local items, picks, moved, gone, spent, picked = {}, {}, {}, {}, {}, {}
  -- `held`: keys met in a row that their limits hold; a whole turn of them ends the call.
  while got < take and budget > 0 and held < size do
    local entry = ring[rpos]
    if not entry and #ring < reach and read_turns() then entry = ring[rpos] end
    if entry then
      rpos = rpos + 1
    else
      entry = again[pos]
      if not entry then break end
      pos = pos + 1
    end
    budget = budget - 1
    local turn, key = entry[1], entry[2]
    local mine = items[key]
    if not mine or (not mine.list[mine.n] and mine.more) then
      -- The key's first due records (or, when this call took all it read, the next ones:
      -- what it picked leaves the pool below). One more is read than used, so the call
      -- knows whether its picks empty the key.
      local base = mine and mine.base + #mine.list or 0
      local list = redis.call('ZRANGEBYLEX', KEYS.keyed, '[i' .. key .. '\0', '(i' .. key .. '\1',
        'LIMIT', base, per + 1)
      local more = #list > per
      if more then list[#list] = nil end
      mine = {n = 1, base = base, list = list, more = more, turn = turn}
      items[key] = mine
    end
    local item = mine.list[mine.n]
    if not item then
      -- Nothing (more) of the key is due: out of the turns until something is.
      gone[#gone + 1] = turn
      gone[#gone + 1] = key
      gone[key] = true
      size = size - 1
    else
      local u = keyed_use(L, key, now, cache)
      local E = u.L
      -- A key with a rate of its own on a queue without one takes no held claim either.
      local skip = got >= starts and ((E.limit and not L.limit)
        or (E.conc and u.taken + 1 > math.floor(E.conc / 2)))
      if skip then
        -- No headroom for a held claim of this key: left in its turn for a worker that
        -- starts it at once.
        refused = refused + 1
      elseif keyed_room(E, u) < 1 then
        held = held + 1
        local at = keyed_next(E, u, now)
        if at >= 0 and (not wait or at < wait) then wait = at end
      else
        mine.n = mine.n + 1
        got, held = got + 1, 0
        picks[#picks + 1] = item
        picks[#picks + 1] = key
        picked[key] = (picked[key] or 0) + 1
        -- Counted now, written below for the records actually claimed.
        if E.limit then u.left = u.left - 1 end
        if E.conc then u.taken = u.taken + 1 end
      end
      if not skip then
        moved[#moved + 1] = turn
        moved[#moved + 1] = key
        again[#again + 1] = {turn, key}  -- its next turn in this call, after every other key
      end
    end
  end
  -- Claim the picks in one step; a record that moved on (claimed by hand, ended,
  -- corrupt) is only dropped from the pool.
  if #picks > 0 then
    local ids, members = {}, {}
    for k = 1, #picks, 2 do
      local item, key = picks[k], picks[k + 1]
      ids[#ids + 1] = string.sub(item, #key + 19)
      members[#members + 1] = item
    end
    redis.call('ZREM', KEYS.keyed, unpack(members))
    local claimed = claim(ids)
    got = 0
    local tokens, slots = {}, {}
    for k = 1, #picks, 2 do
      local key, id = picks[k + 1], ids[(k + 1) / 2]
      if claimed[id] then
        got = got + 1
        spent[key] = (spent[key] or 0) + 1
        if cache[key].L.conc then
          slots[#slots + 1] = 0
          slots[#slots + 1] = 'c' .. key .. '\0' .. id
        end
      end
    end
    if #slots > 0 then redis.call('ZADD', KEYS.keyed, unpack(slots)) end
    for key, n in pairs(spent) do
      if cache[key].L.limit then
        -- u.left counted every pick; a pick not claimed spends no token.
        tokens[#tokens + 1] = 'T' .. key
        tokens[#tokens + 1] = string.format('%.17g', cache[key].left + picked[key] - n)
        tokens[#tokens + 1] = 'A' .. key
        tokens[#tokens + 1] = exact(now)
      end
    end
    if #tokens > 0 then redis.call('HSET', KEYS.limits, unpack(tokens)) end
  end
  -- A key this call's picks emptied leaves the turns now, as one found empty does: it
  -- comes back last when a record of it next enters the pool (keyed_add), so the turns
  -- hold only keys with due records, however many keys came and went.
  for key in pairs(picked) do
    local mine = items[key]
    if not gone[key] and not mine.list[mine.n] and not mine.more then
      gone[#gone + 1] = mine.turn
      gone[#gone + 1] = key
      gone[key] = true
      size = size - 1
    end
  end
  -- Keys that left the turns with state of their own (claims, a bucket) are looked at
  -- again by keyed_sweep: when the bucket is full, and not before a claim just made may
  -- have ended (250 ms).
  if #gone > 0 and (L.conc or L.limit or L.kl) then
    local looks = {}
    for k = 2, #gone, 2 do
      local key, at = gone[k], now + 250
      local u = cache[key]
      if u and u.L.limit and u.left then
        at = math.max(at, now + math.ceil((u.L.burst - u.left) * u.L.period / u.L.limit))
      end
      looks[#looks + 1] = 0
      looks[#looks + 1] = keyed_look(at, 0, key)
    end
    redis.call('ZADD', KEYS.keyed, unpack(looks))
  end
  -- The turns: keys with nothing due out, keys visited to the back (the last visit of a
  -- key visited twice gives its place).
  if #gone > 0 or (#moved > 0 and size > 1) then
    local old, fields, last = {}, {}, {}
    for k = 1, #gone, 2 do
      old[#old + 1] = 'r' .. gone[k] .. gone[k + 1]
      fields[#fields + 1] = 'R' .. gone[k + 1]
    end
    if #fields > 0 then redis.call('HDEL', KEYS.limits, unpack(fields)) end
    local order = {}
    if size > 1 then
      for k = 1, #moved, 2 do last[moved[k + 1]] = k end
      for k = 1, #moved, 2 do
        if last[moved[k + 1]] == k and not gone[moved[k + 1]] then
          order[#order + 1] = moved[k + 1]
        end
        if not last[moved[k + 1] .. '\0seen'] then
          last[moved[k + 1] .. '\0seen'] = true
          old[#old + 1] = 'r' .. moved[k] .. moved[k + 1]
        end
      end
    end
    if #old > 0 then redis.call('ZREM', KEYS.keyed, unpack(old)) end
    if #order > 0 then
      local top = redis.call('HINCRBY', KEYS.limits, 'turn', #order)
      local adds, turns = {}, {}
      for k, key in ipairs(order) do
        local turn = keyed_digits(top - #order + k)
        adds[#adds + 1] = 0
        adds[#adds + 1] = 'r' .. turn .. key
        turns[#turns + 1] = 'R' .. key
        turns[#turns + 1] = turn
      end
      redis.call('ZADD', KEYS.keyed, unpack(adds))
      redis.call('HSET', KEYS.limits, unpack(turns))
    end
  end
  if got >= take and size > 0 or budget <= 0 and held < size and got > 0 then
    wake(now)  -- more may be claimable: another idle worker looks
    return got, now
  end
  -- A call that claims nothing has time to spare: it looks at more keys that left the
  -- turns.
  if got == 0 then keyed_sweep(L, now, 256) end
  if refused > 0 then
    -- Only the headroom rule stopped this call's held claims: a worker with a thread free
    -- may start what is left (the wake key stays); this caller waits for its own.
    wake(now)
    return got, -1
  end
  if got < take and size > 0 and (got < #picks / 2 or budget <= 0 and #gone > 0) then
    -- The call spent its picks on records that had moved on, or its budget on turns with
    -- nothing due (dropped now): what is due further on is still to be looked at, so the
    -- caller (or another idle worker) looks again at once rather than sleeping on it.
    wake(now)
    return got, now
  end
  if budget <= 0 and held < size then
    -- A whole budget of keys held by their limits, none claimed: no worker asks again at
    -- once (it would only spin). Those keys went to the back of the turns, so the next
    -- claim (woken by a settlement, an admission, or the next token) looks further on.
    redis.call('DEL', KEYS.wake)
    return got, wait or -1
  end
  -- Every key in the pool is held by its limits, or the pool is empty: no worker could
  -- claim now. The wake key goes; the answer is the earliest of a key's next token and
  -- the next record to fall due (which enters the pool then).
  redis.call('DEL', KEYS.wake)
  local later = next_due(now)
  if later and (not wait or later < wait) then wait = later end
  return got, wait or -1
end

-- claim_limited (limits_accounting.lua) on a queue with a KEY: the same arguments and answers.
-- Held claims (beyond `start`) only without a RATE: a held claim's token per key would
-- need a count per key (docs/limits.md).
keyed_claim = function(L, now, owner, lease, limit, out, start)
  local starts = (start and start < limit) and start or limit
  if L.limit then limit = starts end
  -- The gate, checked in the same atomic step as the claim (claim_due's rule).
  if redis.call('EXISTS', KEYS.gate) == 1 then return 0, now + 1000 end
  return keyed_take(L, now, limit, function(ids)
    local before = #out
    claim_ids(ids, now, owner, lease, out, 0, 0, #ids, starts)
    local claimed = {}
    for k = before + 1, #out, 7 do claimed[out[k]] = true end
    return claimed
  end, starts)
end
