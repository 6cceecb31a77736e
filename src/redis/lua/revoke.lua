--! uses: high_water
-- KEYS: lease, fence. -> {'revoked', owner, token, exp, ttl, new fence} | {'none'}
-- Ends the current lease (live, or expired and not taken over) and moves the fence past it in one
-- step. Both keys get the new mark, so either alone keeps it, as acquire does.
local cur = redis.call('HMGET', KEYS[1], 'owner', 'token', 'exp', 'ttl')
if not cur[1] then
  return {'none'}
end
local fence = string.format('%.0f', high_water(KEYS[2], KEYS[1]) + 1)
redis.call('SET', KEYS[2], fence)
redis.call('HSET', KEYS[1], 'token', fence)
redis.call('HDEL', KEYS[1], 'owner', 'exp', 'ttl')
return {'revoked', cur[1], cur[2], cur[3], cur[4], fence}
