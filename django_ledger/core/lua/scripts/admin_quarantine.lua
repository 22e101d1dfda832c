-- admin_quarantine.lua: one admin page of a queue's quarantine, in hash order.
-- KEYS: the standard list (codec.lua). ARGV[1] skew (unused), ARGV[2] offset,
-- ARGV[3] limit (0 for the count alone), ARGV[4..] request ids: when given, read
-- those ids instead of a page.
-- Returns {total, id, quarantined bytes, stored bytes or nil, ...}: total is the size
-- of the quarantine; each id comes with its quarantined copy and what the records
-- hash holds for it now (nil once discarded).
-- A page walks HSCAN from the start, so a deep page costs its offset: the quarantine
-- holds the rare corrupt record, never the queue's records.
local out = {redis.call('HLEN', KEYS.quarantine)}

local function add(id, quarantined)
  out[#out + 1] = id
  out[#out + 1] = quarantined
  out[#out + 1] = redis.call('HGET', KEYS.records, id)
end

if #ARGV > 3 then
  for i = 4, #ARGV do
    local quarantined = redis.call('HGET', KEYS.quarantine, ARGV[i])
    if quarantined then add(ARGV[i], quarantined) end
  end
  return out
end

local skip, want = tonumber(ARGV[2]), tonumber(ARGV[3])
local seen = {}
local cursor = '0'
while want > 0 do
  local reply = redis.call('HSCAN', KEYS.quarantine, cursor, 'COUNT', 100)
  cursor = reply[1]
  local page = reply[2]
  for i = 1, #page, 2 do
    local id = page[i]
    -- HSCAN may return an id twice while the hash resizes: count each once.
    if want > 0 and not seen[id] then
      seen[id] = true
      if skip > 0 then
        skip = skip - 1
      else
        add(id, page[i + 1])
        want = want - 1
      end
    end
  end
  if cursor == '0' then break end
end
return out
