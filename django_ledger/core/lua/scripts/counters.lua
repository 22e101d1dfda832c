-- counters.lua: add to a queue's outcome counters and time histograms, by minute and by
-- hour (core/counters.py reads them back). Every key arrives in KEYS (K), under the
-- queue's hash tag ({ns:queue}:counts:...), so on a Redis Cluster all of a queue's
-- counters share its slot, and the script builds no key name:
--   minute, hour            this minute's and this hour's hashes, PREFIX:m:<minute> and
--                           PREFIX:h:<hour> (minute = epoch ms // 60000), for the time
--                           the caller names (ARGV[2]; the caller reads the server clock)
--   old_minute, old_hour    the minute a day back and the hour 30 days back: deleted
--                           (a bucket a pause skipped goes by its own expiry)
--   errors                  PREFIX:e hash task name -> its last error (JSON [class,
--                           first line, at ms])
--   minute_index, hour_index PREFIX:mi, PREFIX:hi zsets of the buckets in use
--   ready, leases, dead     (optional) the queue's indexes: the call then samples the
--                           depth into this minute and this hour, in the same call
-- Hash fields are '<metric>:<task name>' -> count (core/counters.py names the metrics),
-- and the queue's depth samples 'q:pending', 'q:due', 'q:claimed', 'q:dead' -> the most
-- any sample in the bucket saw (several workers sample the same queue: the max is the
-- bucket's peak, whichever worker saw it, and does not grow with the number of workers).
-- ARGV[1] skew in ms (added to the server clock), ARGV[2] the buckets' time in epoch ms,
-- ARGV[3] how many errors E, ARGV[4] most tasks KEYS.errors keeps, then E pairs task, error
-- (overwriting that task's last error; a new task past the bound is not kept), then
-- field, count, field, count...: added to this minute and this hour.
-- Returns {time}; with the indexes, {time, pending, due, claimed, dead} (what it sampled).
local now = tonumber(ARGV[2])
local minute, hour = math.floor(now / 60000), math.floor(now / 3600000)
local KEEP_MINUTES, KEEP_HOURS = 1440, 720

local errors, most = tonumber(ARGV[3]), tonumber(ARGV[4])
if not errors or errors < 0 or not most then
  return redis.error_reply('ERR counters: add needs the error count and bound')
end
local first = 5 + 2 * errors
for i = first, #ARGV - 1, 2 do
  local n = tonumber(ARGV[i + 1])
  if not n or n < 0 or n ~= math.floor(n) then
    return redis.error_reply('ERR counters: count ' .. tostring(ARGV[i + 1]) .. ' is not a whole number')
  end
end
if errors > 0 then
  local held = redis.call('HLEN', KEYS.errors)
  for i = 5, first - 1, 2 do
    if held < most or redis.call('HEXISTS', KEYS.errors, ARGV[i]) == 1 then
      if redis.call('HSET', KEYS.errors, ARGV[i], ARGV[i + 1]) == 1 then held = held + 1 end
    end
  end
  redis.call('EXPIRE', KEYS.errors, KEEP_HOURS * 3600)
end
for i = first, #ARGV - 1, 2 do
  redis.call('HINCRBY', KEYS.minute, ARGV[i], ARGV[i + 1])
  redis.call('HINCRBY', KEYS.hour, ARGV[i], ARGV[i + 1])
end
local result = {now}
if KEYS.dead then
  -- Due against the server's clock (the records' times), whatever the bucket's time.
  local at, due = server_now(), 0
  local low, earliest, after = next_band('-inf')
  while low do
    due = due + redis.call('ZCOUNT', KEYS.ready, exact(low), exact(low + at))
    low, earliest, after = next_band(after)
  end
  local sample = {redis.call('ZCARD', KEYS.ready), due, redis.call('ZCARD', KEYS.leases),
    redis.call('ZCARD', KEYS.dead)}
  local names = {'q:pending', 'q:due', 'q:claimed', 'q:dead'}
  for _, key in ipairs({KEYS.minute, KEYS.hour}) do
    local held = redis.call('HMGET', key, unpack(names))
    for i = 1, 4 do
      local old = tonumber(held[i])
      if not old or sample[i] > old then redis.call('HSET', key, names[i], sample[i]) end
    end
  end
  table.insert(sample, 1, now)
  result = sample
end
-- A backstop for a queue nobody writes any more: the keys go by themselves.
redis.call('EXPIRE', KEYS.minute, KEEP_MINUTES * 60 + 3600)
redis.call('EXPIRE', KEYS.hour, KEEP_HOURS * 3600 + 86400)
redis.call('DEL', KEYS.old_minute, KEYS.old_hour)
for _, r in ipairs({{KEYS.minute_index, minute, KEEP_MINUTES}, {KEYS.hour_index, hour, KEEP_HOURS}}) do
  redis.call('ZADD', r[1], r[2], r[2])
  redis.call('ZREMRANGEBYSCORE', r[1], '-inf', '(' .. (r[2] - r[3] + 1))
  redis.call('EXPIRE', r[1], KEEP_HOURS * 3600 + 86400)
end
return result
