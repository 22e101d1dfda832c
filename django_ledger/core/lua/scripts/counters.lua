-- counters.lua: a queue's outcome counters and time histograms, by minute and by hour.
-- Not one of the scripts on the standard key list (codec.lua gives it server_now and next_band only).
-- K.prefix: the queue's counter prefix ({ns:queue}:counts). Every key written or read
-- starts with it, so on a Redis Cluster all of a queue's counters share its slot:
--   PREFIX:m:<minute> hash   PREFIX:h:<hour> hash   (minute = epoch ms // 60000)
--   PREFIX:mi zset of minutes in use   PREFIX:hi zset of hours in use
--   PREFIX:e hash task name -> its last error (JSON [class, first line, at ms])
-- Hash fields are '<metric>:<task name>' -> count (core/counters.py names the metrics),
-- and the queue's depth samples 'q:pending', 'q:due', 'q:claimed', 'q:dead' -> the most
-- any sample in the bucket saw (several workers sample the same queue: the max is the
-- bucket's peak, whichever worker saw it, and does not grow with the number of workers).
-- K.ready, K.leases, K.dead, when given: the queue's indexes (same hash tag); 'add'
-- then samples the depth into this minute and this hour, in the same call.
-- ARGV[1] skew in ms (added to the server clock), ARGV[2] the time in epoch ms (0: the
-- server clock plus the skew), ARGV[3] 'add' or 'read'.
--   add:  ARGV[4] how many errors E, ARGV[5] most tasks PREFIX:e keeps, then E pairs
--         task, error (overwriting that task's last error; a new task past the bound is
--         not kept), then field, count, field, count...: added to this minute and this
--         hour; minutes older than a day and hours older than 30 days are deleted.
--   read: ARGV[4] 'm' or 'h', ARGV[5] how many buckets back, this one included.
-- Returns {now}; for add with the indexes, {now, pending, due, claimed, dead} (what it
-- sampled); for read, {now, then one flat HGETALL per bucket, oldest first, then the
-- flat HGETALL of the last errors}.
local prefix = K.prefix
local now = tonumber(ARGV[2])
if now == 0 then now = server_now() end
local minute, hour = math.floor(now / 60000), math.floor(now / 3600000)
local KEEP_MINUTES, KEEP_HOURS = 1440, 720

if ARGV[3] == 'add' then
  local mkey, hkey = prefix .. ':m:' .. minute, prefix .. ':h:' .. hour
  local errors, most = tonumber(ARGV[4]), tonumber(ARGV[5])
  if not errors or errors < 0 or not most then
    return redis.error_reply('ERR counters: add needs the error count and bound')
  end
  local first = 6 + 2 * errors
  for i = first, #ARGV - 1, 2 do
    local n = tonumber(ARGV[i + 1])
    if not n or n < 0 or n ~= math.floor(n) then
      return redis.error_reply('ERR counters: count ' .. tostring(ARGV[i + 1]) .. ' is not a whole number')
    end
  end
  if errors > 0 then
    local ekey = prefix .. ':e'
    local held = redis.call('HLEN', ekey)
    for i = 6, first - 1, 2 do
      if held < most or redis.call('HEXISTS', ekey, ARGV[i]) == 1 then
        if redis.call('HSET', ekey, ARGV[i], ARGV[i + 1]) == 1 then held = held + 1 end
      end
    end
    redis.call('EXPIRE', ekey, KEEP_HOURS * 3600)
  end
  for i = first, #ARGV - 1, 2 do
    redis.call('HINCRBY', mkey, ARGV[i], ARGV[i + 1])
    redis.call('HINCRBY', hkey, ARGV[i], ARGV[i + 1])
  end
  local result = {now}
  if K.dead then
    -- Due against the server's clock (the records' times), whatever the bucket's time.
    local at, due = server_now(), 0
    local low, earliest, after = next_band('-inf')
    while low do
      due = due + redis.call('ZCOUNT', K.ready, exact(low), exact(low + at))
      low, earliest, after = next_band(after)
    end
    local sample = {redis.call('ZCARD', K.ready), due, redis.call('ZCARD', K.leases),
      redis.call('ZCARD', K.dead)}
    local names = {'q:pending', 'q:due', 'q:claimed', 'q:dead'}
    for _, key in ipairs({mkey, hkey}) do
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
  redis.call('EXPIRE', mkey, KEEP_MINUTES * 60 + 3600)
  redis.call('EXPIRE', hkey, KEEP_HOURS * 3600 + 86400)
  for _, r in ipairs({{'m', minute, KEEP_MINUTES}, {'h', hour, KEEP_HOURS}}) do
    local index = prefix .. ':' .. r[1] .. 'i'
    redis.call('ZADD', index, r[2], r[2])
    local old = redis.call('ZRANGEBYSCORE', index, '-inf', '(' .. (r[2] - r[3] + 1))
    for _, m in ipairs(old) do redis.call('DEL', prefix .. ':' .. r[1] .. ':' .. m) end
    if #old > 0 then redis.call('ZREMRANGEBYSCORE', index, '-inf', '(' .. (r[2] - r[3] + 1)) end
    redis.call('EXPIRE', index, KEEP_HOURS * 3600 + 86400)
  end
  return result
elseif ARGV[3] == 'read' then
  local res, count = ARGV[4], tonumber(ARGV[5])
  if (res ~= 'm' and res ~= 'h') or not count or count < 1 or count > 1440 then
    return redis.error_reply('ERR counters: read m|h and 1 to 1440 buckets')
  end
  local at = res == 'm' and minute or hour
  local out = {now}
  for b = at - count + 1, at do
    out[#out + 1] = redis.call('HGETALL', prefix .. ':' .. res .. ':' .. b)
  end
  out[#out + 1] = redis.call('HGETALL', prefix .. ':e')
  return out
end
return redis.error_reply('ERR counters: unknown operation ' .. tostring(ARGV[3]))
