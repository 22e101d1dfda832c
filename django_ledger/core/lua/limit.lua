-- limit.lua: read, set, take from and give back to a queue's limits (limits.lua).
-- KEYS: the standard twelve (codec.lua).
-- ARGV[1] skew, ARGV[2] op:
--   'read'           -> {now, rate_limit, rate_period, rate_burst, concurrency, source,
--                        tokens left (text), slots taken}; '' for what is not set
--   'set'            ARGV[3] rate_limit or '', ARGV[4] rate_period ms, ARGV[5] burst,
--                    ARGV[6] concurrency or '', ARGV[7] source, ARGV[8] '1': write even
--                    over an operator's limits -> {1 written / 0 kept}
--   'take'           ARGV[3] n -> {granted}: up to n claims the limits allow now, their
--                    tokens spent (the reference path's claim; it gives back the rest)
--   'refund'         ARGV[3] n tokens not used -> {next due as claim_limited answers it,
--                    or '' when the limits do not hold the rest}
local now = server_now()
local op = ARGV[2]
local L = limits_read()
if op == 'read' then
  if not L then return {now, '', '', '', '', '', '', redis.call('ZCARD', KEYS[3])} end
  local left = L.limit and string.format('%.3f', limits_tokens(L, now)) or ''
  return {now, L.limit or '', L.period or '', L.burst or '', L.conc or '', L.source or '',
    left, redis.call('ZCARD', KEYS[3])}
elseif op == 'set' then
  if L and L.source == 'operator' and ARGV[8] ~= '1' then return {0} end
  -- The same limits again (every process writes its settings once) change nothing.
  local same = (L and tostring(L.limit or '') == ARGV[3] and tostring(L.conc or '') == ARGV[6]
    and L.source == ARGV[7] and (ARGV[3] == '' or (tostring(L.period) == ARGV[4]
    and tostring(L.burst) == ARGV[5]))) or (not L and ARGV[3] == '' and ARGV[6] == '')
  if same then return {0} end
  -- The bucket carries over, clamped to the new burst; a new rate starts full.
  local tokens
  if L and L.limit and ARGV[3] ~= '' then
    tokens = math.min(tonumber(ARGV[5]), limits_tokens(L, now))
  end
  redis.call('DEL', KEYS[12])
  if ARGV[3] ~= '' then
    redis.call('HSET', KEYS[12], 'rate_limit', ARGV[3], 'rate_period', ARGV[4],
      'rate_burst', ARGV[5])
    if tokens then
      redis.call('HSET', KEYS[12], 'tokens', string.format('%.17g', tokens), 'at', exact(now))
    end
  end
  if ARGV[6] ~= '' then redis.call('HSET', KEYS[12], 'concurrency', ARGV[6]) end
  if ARGV[3] ~= '' or ARGV[6] ~= '' then redis.call('HSET', KEYS[12], 'source', ARGV[7]) end
  -- Raised or lifted limits may let a waiting worker claim: wake one when work is due.
  if due_now(now) then wake(now) end
  return {1}
elseif op == 'take' then
  if not L then return {tonumber(ARGV[3])} end
  local got = math.min(tonumber(ARGV[3]), limits_room(L, now))
  limits_spend(L, now, got)
  return {got}
elseif op == 'refund' then
  if not L then return {''} end
  local room = limits_room(L, now)
  local back = tonumber(ARGV[3])
  if L.limit and back > 0 then
    L.left = math.min(L.burst, L.left + back)
    redis.call('HSET', KEYS[12], 'tokens', string.format('%.17g', L.left), 'at', exact(now))
    room = limits_room(L, now)
  end
  if room > 0 then return {''} end
  return {limits_next(L, now)}
end
return redis.error_reply('unknown limit op ' .. tostring(op))
