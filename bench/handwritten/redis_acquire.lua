-- A lease acquire by hand, for redis-benchmark's EVALSHA: take the lease if it is free (absent:
-- released or expired, as its key expires with the lease) or already the caller's, with a new
-- token from the fence counter for a new holder; return the token, or nil when another holds it.
-- KEYS: lease (hash of owner and token, expiring with the lease), fence. ARGV: owner, ttl ms.
local owner = redis.call('HGET', KEYS[1], 'owner')
local token
if owner == ARGV[1] then
  token = redis.call('HGET', KEYS[1], 'token')
elseif owner then
  return nil
else
  token = redis.call('INCR', KEYS[2])
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'token', token)
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return token
