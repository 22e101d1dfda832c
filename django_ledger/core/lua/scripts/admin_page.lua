-- admin_page.lua: the rows of one admin page of records, read in one consistent snapshot.
-- KEYS: the standard list (codec.lua). ARGV[1] skew (unused: nothing here reads the clock).
-- ARGV[2] mode:
--   'rank': ARGV[3] offset, ARGV[4] limit, ARGV[5] '1' to read scores high to low, then
--           triples from ARGV[6]: index by name (ready, leases, completed, failed, dead),
--           lowest score, highest score (inclusive integers, or '-inf' / '+inf'). The
--           segments form one list in the order given; the page is [offset, offset + limit).
--   'ids':  ARGV[3..] request ids to read.
-- Returns {counts, rows}: counts holds each segment's size ('rank'; empty for 'ids');
-- rows holds 12 values per record found: id, state letter ('X' when the bytes do not
-- decode), due_at, lease_until (-1 for none), attempts, fence, created_at, updated_at,
-- owner, traceparent, size in bytes, task path ('' for none). Payloads stay in Redis: a
-- page is small whatever the records hold.
local rows = {}

-- The most bytes a task path may take in the payload's suffix that task_of reads.
local TASK_SUFFIX_BYTES = 300

-- The task path a task document names, or '': a Django task's payload is canonical JSON
-- (keys sorted), so it ends with ,"task":"<path>","v":1} and only its last bytes are read,
-- never the whole payload (the arguments lead and may be large).
local function task_of(tail)
  local task = string.match(string.sub(tail, -TASK_SUFFIX_BYTES), ',"task":"([^"\\]+)","v":1}$')
  return task or ''
end

local function add_row(id)
  local raw = redis.call('HGET', KEYS.records, id)
  -- An index entry whose record is gone is skipped: repair owns the indexes.
  if not raw then return end
  -- The same verification as every writing script: a corrupt record is shown as such.
  local r = decode(id, raw)
  if r then
    rows[#rows + 1] = id
    rows[#rows + 1] = r.s
    rows[#rows + 1] = r.due
    rows[#rows + 1] = r.lease or -1
    rows[#rows + 1] = r.att
    rows[#rows + 1] = r.fence
    rows[#rows + 1] = r.created
    rows[#rows + 1] = r.updated
    rows[#rows + 1] = r.owner
    rows[#rows + 1] = traceparent_of(r)
    rows[#rows + 1] = #raw
    rows[#rows + 1] = task_of(r.tail)
  else
    rows[#rows + 1] = id
    rows[#rows + 1] = 'X'
    for _ = 1, 6 do rows[#rows + 1] = 0 end
    rows[#rows + 1] = ''
    rows[#rows + 1] = ''
    rows[#rows + 1] = #raw
    rows[#rows + 1] = ''
  end
end

local counts = {}
if ARGV[2] == 'ids' then
  for i = 3, #ARGV do add_row(ARGV[i]) end
  return {counts, rows}
end

local skip, want, descending = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5] == '1'
for i = 6, #ARGV, 3 do
  local key, low, high = KEYS[ARGV[i]], ARGV[i + 1], ARGV[i + 2]
  local count = redis.call('ZCOUNT', key, low, high)
  counts[#counts + 1] = count
  if want > 0 and skip < count then
    -- Page by rank, not by score with LIMIT: finding the first rank of the range costs
    -- one ZCOUNT (O(log n)), so a deep page costs what the first page does.
    local take = math.min(want, count - skip)
    local ids
    if descending then
      local above = 0
      if high ~= '+inf' then above = redis.call('ZCOUNT', key, '(' .. high, '+inf') end
      ids = redis.call('ZREVRANGE', key, above + skip, above + skip + take - 1)
    else
      local below = 0
      if low ~= '-inf' then below = redis.call('ZCOUNT', key, '-inf', '(' .. low) end
      ids = redis.call('ZRANGE', key, below + skip, below + skip + take - 1)
    end
    for _, id in ipairs(ids) do add_row(id) end
    want = want - take
    skip = 0
  elseif skip >= count then
    skip = skip - count
  end
end
return {counts, rows}
