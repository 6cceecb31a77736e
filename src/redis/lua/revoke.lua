--! uses: high_water
-- KEYS: lease, fence. -> {'revoked', owner, token, exp, ttl, new fence} | {'none'}
-- Ends the current lease (live, or expired and not taken over) and moves the fence past it in one
-- step. Both keys get the new mark, so either alone keeps it, as acquire does.
local cur = redis.call('HMGET', KEYS[1], 'owner', 'token', 'exp', 'ttl')
if not cur[1] then
  -- "Nothing to revoke" may rest on a release or revoke that never reached a replica: rewriting
  -- what is there unchanged is replicated behind it, so WAIT on this connection covers it. With
  -- neither key, no write ever ended a lease here.
  if cur[2] then
    redis.call('HSET', KEYS[1], 'token', cur[2])
  else
    local f = redis.call('GET', KEYS[2])
    if f then
      redis.call('SET', KEYS[2], f)
    end
  end
  return {'none'}
end
local fence = string.format('%.0f', high_water(KEYS[2], KEYS[1]) + 1)
redis.call('SET', KEYS[2], fence)
redis.call('HSET', KEYS[1], 'token', fence)
redis.call('HDEL', KEYS[1], 'owner', 'exp', 'ttl')
return {'revoked', cur[1], cur[2], cur[3], cur[4], fence}
