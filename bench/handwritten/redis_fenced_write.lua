-- A one-key fenced write by hand, for redis-benchmark's EVALSHA: refuse a token older than the
-- newest one issued, else bump the version and set the value.
-- KEYS: fence (newest token), state (hash of values and its version). ARGV: token, key, value.
local newest = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) < newest then
  return redis.error_reply('stale token')
end
local version = redis.call('HINCRBY', KEYS[2], '#version', 1)
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
return version
