-- schedule_define.lua: store, replace or delete one run-time schedule, compare-and-set.
-- KEYS.state the scheduler's state hash ({namespace}:schedules).
-- KEYS.defs  the stored schedules' hash ({namespace}:schedule-defs): "doc K" (its JSON),
--            "ver K" (its version, from 1) and "stamp" (moves at every change).
-- ARGV[1]  "put" or "delete".
-- ARGV[2]  the schedule key.
-- ARGV[3]  the version the caller read ("": the schedule must not exist yet).
-- ARGV[4]  the schedule's JSON (put).
-- ARGV[5]  the "through" second the caller read ("-": do not check; "": it read none).
-- ARGV[6]  the new "through" second ("": leave it).
-- ARGV[7]  the pending entry of each fire the old timing owes (JSON: node, deadline).
-- ARGV[8..] the epochs of those fires.
-- Returns {status, version, stamp}: status "ok", "conflict" (the version moved: another
-- editor saved first; version is the current one, 0 for none) or "moved" (a scheduler
-- decided since the caller read "through": read again and retry).
local key = ARGV[2]
local version = redis.call('HGET', KEYS.defs, 'ver ' .. key)
if (version or '') ~= ARGV[3] then
  return {'conflict', tonumber(version or '0'), 0}
end
local through_field = 'through ' .. key
if ARGV[5] ~= '-' and (redis.call('HGET', KEYS.state, through_field) or '') ~= ARGV[5] then
  return {'moved', tonumber(version or '0'), 0}
end
-- A new or deleted schedule starts from nothing: no "through", pause or pending fire
-- of an earlier schedule of that name survives (the state hash shares the hash tag).
if ARGV[3] == '' or ARGV[1] == 'delete' then
  for _, name in ipairs(redis.call('HKEYS', KEYS.state)) do
    local kind, rest = string.match(name, '^(%a+) (.*)$')
    if kind and (rest == key or (kind == 'pending' and string.sub(rest, 1, #key + 1) == key .. ' ')) then
      redis.call('HDEL', KEYS.state, name)
    end
  end
end
local new_version = 0
if ARGV[1] == 'delete' then
  redis.call('HDEL', KEYS.defs, 'doc ' .. key, 'ver ' .. key)
else
  new_version = tonumber(version or '0') + 1
  redis.call('HSET', KEYS.defs, 'doc ' .. key, ARGV[4], 'ver ' .. key, new_version)
  if ARGV[6] ~= '' then
    -- The edit decides what the old timing owed up to now: the new one fires after.
    for i = 8, #ARGV do
      redis.call('HSET', KEYS.state, 'pending ' .. key .. ' ' .. ARGV[i], ARGV[7])
    end
    redis.call('HSET', KEYS.state, through_field, ARGV[6])
  end
end
local stamp = redis.call('HINCRBY', KEYS.defs, 'stamp', 1)
return {'ok', new_version, stamp}
