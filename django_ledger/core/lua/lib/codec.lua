-- codec.lua: the library's first part (core/library.py), read by every ledger function.
--
-- Every writing script receives the same KEYS, all with the queue's hash tag:
--   KEYS.records records (hash)    KEYS.ready ready (zset)      KEYS.leases leases (zset)
--   KEYS.gate gate (string)     KEYS.quarantine quarantine (hash) KEYS.completed completed (zset)
--   KEYS.failed failed (zset)     KEYS.dead dead (zset)       KEYS.fences fences (string counter)
--   KEYS.results results (hash: request_id -> the result a settlement stored with it)
--   KEYS.wake wake (zset of one member, 'w': there while something may be due that no
--            worker has claimed yet; an idle worker blocks on it with BZPOPMIN)
--   KEYS.limits limits (hash: a queue's RATE and CONCURRENCY and the rate's bucket;
--            limits_accounting.lua; with a KEY, each request's key and each key's use: keyed_claim.lua)
--   KEYS.flows flows (hash: the queue's workflows: each step's spec, its dependants, the
--            parents a waiting step still waits for; workflows.lua)
--   KEYS.keyed keyed (zset: a KEY queue's pool, keyed_claim.lua)
--   KEYS.held held (zset: a RATE queue's held claims)
--   KEYS.progress progress (hash: request_id -> what its running task reported, progress.lua)
-- and ARGV[1] = a clock skew in ms (0 outside tests) added to the server clock.
--
-- Record encoding version 1 (records.py and docs/encoding.md describe the same bytes):
--   offset 0  '1' (version)   1  H: 8 lowercase hex   9  state letter
--   10 due_at u64 BE   18 lease_until u64 (0 unless CLAIMED)   26 attempts u64   34 fence u64
--   42 created_at u64  50 updated_at u64   58 owner length u16   60 traceparent length u8
--   61 owner, then traceparent, then payload to the end; all three UTF-8.
-- H = first 8 hex of SHA-1(id .. "\0" .. bytes from offset 9 to the end): it binds the id
-- and covers every other byte. One digest per read and one per write: sha1hex costs
-- about the same for 60 bytes as for 600, so one digest beats two smaller ones.

local LAYOUT = '>c8c1I8I8I8I8I8I8I2I1'
local BODY = '>c1I8I8I8I8I8I8I2I1'

local function server_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
end

local function digest(s)
  return string.sub(redis.sha1hex(s), 1, 8)
end

-- Whether bytes i..j of s are strict UTF-8 (as Python decodes it: no overlong forms,
-- no surrogates, nothing past U+10FFFF), so Lua and Python agree on what is corrupt.
local function utf8_ok(s, i, j)
  i = string.find(s, '[\128-\255]', i)
  while i and i <= j do
    local c, n, lo, hi = string.byte(s, i), 0, 0x80, 0xBF
    if c >= 0xC2 and c <= 0xDF then n = 1
    elseif c == 0xE0 then n, lo = 2, 0xA0
    elseif (c >= 0xE1 and c <= 0xEC) or c == 0xEE or c == 0xEF then n = 2
    elseif c == 0xED then n, hi = 2, 0x9F
    elseif c == 0xF0 then n, lo = 3, 0x90
    elseif c >= 0xF1 and c <= 0xF3 then n = 3
    elseif c == 0xF4 then n, hi = 3, 0x8F
    else return false end
    if i + n > j then return false end
    local b = string.byte(s, i + 1)
    if b < lo or b > hi then return false end
    for k = i + 2, i + n do
      b = string.byte(s, k)
      if b < 0x80 or b > 0xBF then return false end
    end
    i = string.find(s, '[\128-\255]', i + n + 1)
  end
  return true
end

-- Whether any byte of s[i..j] is >= 0x80. ORs the bytes four at a time (struct and bit
-- run in C: about ten times faster than a pattern scan); a false alarm from the position
-- struct.unpack also returns only sends the text down the exact check.
local WORDS = {}
local function high_bit(s, i, j)
  while j - i >= 3 do
    local words = math.min(math.floor((j - i + 1) / 4), 512)
    local layout = WORDS[words]
    if not layout then
      layout = '>' .. string.rep('I4', words)
      WORDS[words] = layout
    end
    if bit.band(bit.bor(struct.unpack(layout, s, i)), 0x80808080) ~= 0 then return true end
    i = i + words * 4
  end
  for k = i, j do
    if string.byte(s, k) >= 128 then return true end
  end
  return false
end

-- Decode and verify; nil when the bytes are corrupt (callers never act on them).
-- The payload is not split out: r.tail holds traceparent .. payload as stored.
-- Version 2 carries a priority byte (signed, never 0) at offset 61 and binds its
-- version byte into H; version 1 is priority 0. Version 3 is version 2 with a flags
-- byte at offset 62 (its priority may be 0): 1 held (a CLAIMED record whose work has not
-- started), 2 given back (a PENDING record whose held claim repair gave back).
local function decode(id, raw)
  local version = string.byte(raw, 1)
  if #raw < 61 or (version ~= 49 and version ~= 50 and version ~= 51) then return nil end
  local h, s, due, lease, att, fence, created, updated, olen, tlen = struct.unpack(LAYOUT, raw, 2)
  local owner_at, prio, flags, bound = 62, 0, 0, ''
  if version == 50 then
    if #raw < 62 then return nil end
    prio = struct.unpack('>b', raw, 62)
    if prio == 0 or prio < -100 or prio > 100 then return nil end
    owner_at, bound = 63, '2'
  elseif version == 51 then
    if #raw < 63 then return nil end
    prio = struct.unpack('>b', raw, 62)
    flags = string.byte(raw, 63)
    if prio < -100 or prio > 100 or (flags ~= 1 and flags ~= 2) then return nil end
    if (flags == 1 and s ~= 'C') or (flags == 2 and s ~= 'P') then return nil end
    owner_at, bound = 64, '3'
  end
  local tail_at = owner_at + olen
  if #raw < tail_at - 1 + tlen or not string.find('PCKFD', s, 1, true) or (s == 'C') ~= (lease > 0) then return nil end
  -- The tail (traceparent .. payload) is cut once and reused, for the digest and after.
  local tail = string.sub(raw, tail_at)
  if digest(id .. '\0' .. bound .. string.sub(raw, 10, tail_at - 1) .. tail) ~= h then return nil end
  -- Only text with bytes >= 0x80 needs the exact check.
  if high_bit(raw, owner_at, #raw) and not (utf8_ok(raw, owner_at, tail_at - 1)
      and utf8_ok(raw, tail_at, tail_at + tlen - 1) and utf8_ok(raw, tail_at + tlen, #raw)) then
    return nil
  end
  local r = {
    s = s, due = due, att = att, fence = fence, created = created, updated = updated,
    owner = string.sub(raw, owner_at, tail_at - 1), tlen = tlen, tail = tail, prio = prio,
    held = flags == 1, given = flags == 2,
  }
  if lease > 0 then r.lease = lease end
  return r
end

-- Encode r. Its flags must fit its state: callers clear r.held when a record leaves
-- CLAIMED and r.given when it leaves PENDING.
local function encode(id, r)
  local head = struct.pack(BODY, r.s, r.due, r.lease or 0, r.att, r.fence,
    r.created, r.updated, #r.owner, r.tlen)
  -- Each concatenation below is one copy: the body is never built on its own.
  local flags = (r.held and 1 or 0) + (r.given and 2 or 0)
  if flags ~= 0 then
    head = head .. struct.pack('>b', r.prio or 0) .. string.char(flags)
    return '3' .. digest(id .. '\0' .. '3' .. head .. r.owner .. r.tail) .. head .. r.owner .. r.tail
  end
  if r.prio and r.prio ~= 0 then
    head = head .. struct.pack('>b', r.prio)
    return '2' .. digest(id .. '\0' .. '2' .. head .. r.owner .. r.tail) .. head .. r.owner .. r.tail
  end
  return '1' .. digest(id .. '\0' .. head .. r.owner .. r.tail) .. head .. r.owner .. r.tail
end

local function payload_of(r)
  if r.tlen == 0 then return r.tail end
  return string.sub(r.tail, r.tlen + 1)
end

-- Priorities lie PRIORITY_STEP apart in the ready index (records.py, the same): a
-- PENDING record's score is due - prio * step, so the index orders by priority first.
local PRIORITY_STEP = 8796093022208  -- 2^43

-- A whole number as Redis reads it exactly: Lua hands numbers to redis.call with 14
-- significant digits, too few for a priority band's scores.
local function exact(n)
  return string.format('%.0f', n)
end

-- The score a record has in its state's index (a string: exact()).
local function score_of(r)
  if r.s == 'P' then return exact(r.due - (r.prio or 0) * PRIORITY_STEP) end
  if r.s == 'C' then return exact(r.lease) end
  return exact(r.updated)
end

-- Live records make a queue full: PENDING and CLAIMED (counted by their indexes) and
-- quarantined ids. Ended records never do; they are bounded apart (trim_ended).
local function live_count()
  return redis.call('ZCARD', KEYS.ready) + redis.call('ZCARD', KEYS.leases) + redis.call('HLEN', KEYS.quarantine)
end

-- Whether an id holds a control character: C0, DEL, C1 (U+0080..U+009F) or the line and
-- paragraph separators U+2028 and U+2029 (records.py refuses the same).
local function has_control(s)
  return string.find(s, '[%z\1-\31\127]') ~= nil or string.find(s, '\194[\128-\159]') ~= nil
    or string.find(s, '\226\128[\168\169]') ~= nil
end

-- Tell an idle worker to look: the wake key's one member (BZPOPMIN returns at once for a
-- worker blocked on it). `at`: when what was written falls due (informational).
local function wake(at)
  redis.call('ZADD', KEYS.wake, exact(at), 'w')
end
