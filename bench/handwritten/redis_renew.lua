-- A lease renewal by hand, for redis-benchmark's EVALSHA: extend the lease only while the caller
-- still holds it with the same token. KEYS: lease. ARGV: owner, token, ttl ms. -> 1, or 0 if lost.
local h = redis.call('HMGET', KEYS[1], 'owner', 'token')
if h[1] ~= ARGV[1] or h[2] ~= ARGV[2] then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
