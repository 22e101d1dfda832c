-- bulk.lua: one page of an operator's bulk action over a filter (core/bulk.py).
-- KEYS: the standard list (codec.lua), then KEYS.run: the run's hash on this shard
-- (token: the stepper that holds the run; seg, score, id: where its reading stands;
-- done, skipped: its counts). ARGV[1] skew, ARGV[2] mode:
--   'page': read what matches after the run's position. ARGV[3] token, ARGV[4] the index
--           (ready, leases, completed, failed, dead), ARGV[5] its state letter, ARGV[6]
--           lowest and ARGV[7] highest score (integers, or '-inf' / '+inf'), ARGV[8] most
--           entries to look at, ARGV[9] started: a record updated at or after it has moved
--           on since the run began and is left, ARGV[10] task path ('' any), ARGV[11]
--           'raw' to return each match's bytes, else their SHA-1 (hex).
--           Returns {looked, last score, last id, more ('1' or '0'), id1, d1, id2, d2, ...};
--           {-1} when ARGV[3] no longer holds the run.
--   'act':  act on what a page matched, each only if still the bytes matched. ARGV[3]
--           token, ARGV[4] action (retry, fail, purge: cancel is core/cancelling.py's),
--           ARGV[5..7] the position after the page (seg, score, id), ARGV[8..] pairs id,
--           SHA-1 of its bytes as matched.
--           Returns {done, skipped}; {-1} when ARGV[3] no longer holds the run (nothing
--           written). The counts and the position move with the writes: a crash leaves
--           the run where its last page left it.
--   'count': a preview: ARGV[4..11] as for 'page' (ARGV[3] unused), ARGV[12] the rank to
--           start from ('' the range's start). Returns {looked, matched, next rank, more}.
--   'move': only move the position (ARGV[3] token, ARGV[5..7] seg, score, id) and count
--           ARGV[8] done and ARGV[9] skipped (a cancel page, acted on record by record).
--           Returns 1; {-1} when ARGV[3] no longer holds the run (nothing written).

-- Whether a sorts before b byte by byte, as a sorted set orders members of one score
-- (Lua's < follows the server's collation locale).
local function before(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- The rank of the first entry after (score, id) in key: entries of one score sort by
-- member, so a binary search over that score's entries finds it without walking them.
local function rank_after(key, score, id)
  local lo = redis.call('ZCOUNT', key, '-inf', '(' .. score)
  local hi = lo + redis.call('ZCOUNT', key, score, score)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local m = redis.call('ZRANGE', key, mid, mid)[1]
    if before(id, m) then hi = mid else lo = mid + 1 end
  end
  return lo
end

local TASK_SUFFIX_BYTES = 300

-- The task path a task document names, or '' (admin_page.lua reads it the same way).
local function task_of(tail)
  local task = string.match(string.sub(tail, -TASK_SUFFIX_BYTES), ',"task":"([^"\\]+)","v":1}$')
  return task or ''
end

-- Read up to ARGV[8] entries of the index from rank `start`: {looked, last score, last id,
-- more, matches...} (page mode's reply), or only how many matched (`count_only`).
local function read(start, count_only)
  local key, letter, low, high = KEYS[ARGV[4]], ARGV[5], ARGV[6], ARGV[7]
  local want, started, task, raw_out = tonumber(ARGV[8]), tonumber(ARGV[9]), ARGV[10], ARGV[11] == 'raw'
  if start == nil then
    start = 0
    if low ~= '-inf' then start = redis.call('ZCOUNT', key, '-inf', '(' .. low) end
  end
  local entries = redis.call('ZRANGE', key, start, start + want, 'WITHSCORES')
  local out = {0, '', '', '0'}
  local looked, matched = 0, 0
  for i = 1, #entries, 2 do
    local id, score = entries[i], entries[i + 1]
    if high ~= '+inf' and tonumber(score) > tonumber(high) then break end
    if looked == want then out[4] = '1'; break end
    looked = looked + 1
    out[2], out[3] = score, id
    local raw = redis.call('HGET', KEYS.records, id)
    -- Gone or corrupt: repair's business, never an operator's bulk action.
    local r = raw and decode(id, raw)
    if r and r.s == letter and r.updated < started and (task == '' or task_of(r.tail) == task) then
      matched = matched + 1
      if not count_only then
        out[#out + 1] = id
        out[#out + 1] = raw_out and raw or redis.sha1hex(raw)
      end
    end
  end
  out[1] = looked
  if count_only then return {looked, matched, start + looked, out[4]} end
  return out
end

local mode = ARGV[2]
-- A preview's count: no run, only a rank to start from (ARGV[12], '' the range's start).
if mode == 'count' then return read(tonumber(ARGV[12]), true) end

if redis.call('HGET', KEYS.run, 'token') ~= ARGV[3] then return {-1} end

if mode == 'move' then
  redis.call('HSET', KEYS.run, 'seg', ARGV[5], 'score', ARGV[6], 'id', ARGV[7])
  redis.call('HINCRBY', KEYS.run, 'done', ARGV[8])
  redis.call('HINCRBY', KEYS.run, 'skipped', ARGV[9])
  return 1
end

if mode == 'page' then
  local score, last = redis.call('HGET', KEYS.run, 'score'), redis.call('HGET', KEYS.run, 'id')
  if score and score ~= '' then return read(rank_after(KEYS[ARGV[4]], score, last), false) end
  return read(nil, false)
end

-- mode 'act'
local action = ARGV[4]
local now = server_now()
local done, skipped, woke = 0, 0, false
local failed, final = {}, {}
for i = 8, #ARGV, 2 do
  local id = ARGV[i]
  local raw = redis.call('HGET', KEYS.records, id)
  -- The compare-and-set: only the bytes the page matched are acted on.
  local r = raw and redis.sha1hex(raw) == ARGV[i + 1] and decode(id, raw)
  if not r then
    skipped = skipped + 1
  elseif action == 'retry' then
    local ended = string.find('KFD', r.s, 1, true) ~= nil
    -- The bytes matched decode as this state: its index holds the id (else repair mends it).
    redis.call('ZREM', index_of(r.s), id)
    r.s, r.due, r.lease, r.owner, r.att, r.updated = 'P', now, nil, '', 0, now
    r.held, r.given = false, false
    redis.call('HSET', KEYS.records, id, encode(id, r))
    redis.call('ZADD', KEYS.ready, score_of(r), id)
    -- A workflow step's retry reopens the steps its ending cancelled, as flow_reopen.lua.
    if ended then flow_reopen(id) end
    woke = true
    done = done + 1
  elseif action == 'fail' and r.s == 'P' then
    redis.call('ZREM', KEYS.ready, id)
    r.s, r.lease, r.owner, r.updated, r.held, r.given = 'F', nil, '', now, false, false
    redis.call('HSET', KEYS.records, id, encode(id, r))
    redis.call('ZADD', KEYS.failed, score_of(r), id)
    failed[#failed + 1], final[id] = id, r
    done = done + 1
  elseif action == 'purge' and string.find('KFD', r.s, 1, true) then
    redis.call('ZREM', index_of(r.s), id)
    forget(id)
    done = done + 1
  else
    skipped = skipped + 1  -- it no longer fits the action (the page read it as matching)
  end
end
-- A workflow step's dependants move on, for the page's failed steps at once (one HMGET).
if #failed > 0 then flow_settled(now, failed, final) end
if woke then wake(now) end
redis.call('HSET', KEYS.run, 'seg', ARGV[5], 'score', ARGV[6], 'id', ARGV[7])
redis.call('HINCRBY', KEYS.run, 'done', done)
redis.call('HINCRBY', KEYS.run, 'skipped', skipped)
return {done, skipped}
