-- unique.lua: admit one call of a unique task, or answer the record that holds the call;
-- a debounced call moves that record's due time later.
-- KEYS: the standard list (codec.lua); KEYS.unique maps a call's digest to its holder.
-- ARGV[1] skew, ARGV[2] max_records, ARGV[3] delay ms, ARGV[4] traceparent ('' for none),
-- ARGV[5] priority, ARGV[6] mode: 'record' (the id is the call's own: held while the
-- record is kept), 'start' (held while PENDING and never started), 'end' (held until it
-- ends), 'period' (held for ARGV[7] ms from its admission), ARGV[7] period ms,
-- ARGV[8] debounce ms (0: none), ARGV[9] the most a debounce delays from the first
-- admission, ms, ARGV[10] the call's digest ('' in mode 'record'), ARGV[11] the id of a
-- new record, ARGV[12] its payload.
-- Returns {now, code, detail, id, due}: code as admit.lua's (1 admitted, 2 duplicate,
-- 3 conflict, 4 full, 5 quarantined, 6 corrupt, 8 a workflow's step holds the id); id:
-- the record answered (the new one, or the holder); due: its due time now (0 if none).
-- The holder's state is read here, in the same script as the admission: a claim (another
-- script) that started the holder runs wholly before or after, so 'start' releases the
-- call exactly when the record is claimed, and two admissions never both find it free.
local now = server_now()
local max, delay, tp, prio = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local mode, period, debounce, most = ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local field, id, payload = ARGV[10], ARGV[11], ARGV[12]

-- Fields whose record is gone (ended and purged) are dropped, two sampled per call:
-- the hash stays near the records it names without a sweep of its own.
if field ~= '' then
  local sampled = redis.call('HRANDFIELD', KEYS.unique, 2, 'WITHVALUES')
  for i = 1, #sampled, 2 do
    if redis.call('HEXISTS', KEYS.records, sampled[i + 1]) == 0 then
      redis.call('HDEL', KEYS.unique, sampled[i])
    end
  end
end

local holder = id
if field ~= '' then holder = redis.call('HGET', KEYS.unique, field) end
local raw = holder and redis.call('HGET', KEYS.records, holder)
if raw then
  local r = decode(holder, raw)
  if not r then
    if mode == 'record' then
      if redis.call('HEXISTS', KEYS.quarantine, holder) == 1 then return {now, 5, '', holder, 0} end
      return {now, 6, '', holder, 0}
    end
    -- another mode's holder that does not decode holds nothing: a new record takes over
  else
    local holds = mode == 'record'
      or (mode == 'start' and r.s == 'P' and r.att == 0)
      or (mode == 'end' and (r.s == 'P' or r.s == 'C'))
      or (mode == 'period' and now < r.created + period)
    if holds then
      if payload_of(r) ~= payload then return {now, 3, raw, holder, r.due} end
      -- Debounce: only a record never started and not claimed now; never earlier, and
      -- never past the most from its admission.
      if debounce > 0 and r.s == 'P' and r.att == 0 then
        local due = math.min(now + math.max(delay, debounce), r.created + most)
        if due > r.due then
          r.due, r.updated = due, now
          raw = encode(holder, r)
          redis.call('HSET', KEYS.records, holder, raw)
          redis.call('ZADD', KEYS.ready, score_of(r), holder)
        end
      end
      return {now, 2, raw, holder, r.due}
    end
  end
end
if has_control(id) then return {now, 7, '', id, 0} end
if redis.call('EXISTS', KEYS.flows) == 1 and redis.call('HEXISTS', KEYS.flows, 'n:' .. id) == 1 then
  return {now, 8, '', id, 0}
end
if redis.call('HEXISTS', KEYS.records, id) == 1 then
  -- A new record's id is new (random); taken only by a caller's bug: refuse, never overwrite.
  return {now, 3, redis.call('HGET', KEYS.records, id), id, 0}
end
if live_count() >= max then return {now, 4, '', id, 0} end
local due = now + math.max(delay, debounce)
local r = {
  s = 'P', due = due, att = 0, fence = 0, created = now, updated = now,
  owner = '', tlen = #tp, tail = (tp == '' and payload) or tp .. payload, prio = prio}
redis.call('HSET', KEYS.records, id, encode(id, r))
redis.call('ZADD', KEYS.ready, score_of(r), id)
if field ~= '' then redis.call('HSET', KEYS.unique, field, id) end
wake(due)
return {now, 1, '', id, due}
