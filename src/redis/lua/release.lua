-- KEYS: lease. ARGV: owner, token. -> 1 released | 0 not the current owner
-- The token stays in the hash (owner gone = free): a second floor under the fence counter.
local cur = redis.call('HMGET', KEYS[1], 'owner', 'token')
if cur[1] == ARGV[1] and cur[2] == ARGV[2] then
  redis.call('HDEL', KEYS[1], 'owner', 'exp', 'ttl')
  return 1
end
return 0
