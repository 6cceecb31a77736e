-- KEYS: version, state, policy; for a name with a group on one server, then the version key
-- that versions before the grouped key form wrote for it. ARGV: fence_required ('1'|'0'), then
-- key, encoded entry, ... -> 1 created | 0 exists (left as it is, policy included) | -1 registered
-- in the earlier form only (nothing written: a second copy of its state would fork it)
if KEYS[4] and redis.call('EXISTS', KEYS[1]) == 0 and redis.call('EXISTS', KEYS[4]) == 1 then
  return -1
end
local version = redis.call('GET', KEYS[1])
if version then
  -- The registration that made it may never have reached a replica: rewriting the version
  -- unchanged is replicated behind it, so WAIT on this connection covers it.
  redis.call('SET', KEYS[1], version)
  return 0
end
redis.call('SET', KEYS[1], '0')
redis.call('HSET', KEYS[3], 'fence_required', ARGV[1])
for i = 2, #ARGV, 2 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
end
return 1
