-- fence.lua: take the next fence for a claim of the reference path (codec.lua, next_fence).
-- KEYS: the standard list (codec.lua).
-- ARGV[1] skew, ARGV[2] the record's current fence.
-- Returns the fence: greater than ARGV[2] and than every fence this queue gave before.
return next_fence(tonumber(ARGV[2]))
