--! uses: now high_water
-- KEYS: lease, fence. ARGV: owner, ttl ms.
-- -> {'ok', token, exp} | {'busy', holder, token, exp}
local ttl = tonumber(ARGV[2])
local exp = string.format('%.0f', now + ttl)
local cur = redis.call('HMGET', KEYS[1], 'owner', 'token', 'exp')
if cur[1] and tonumber(cur[3]) > now then
  if cur[1] ~= ARGV[1] then
    return {'busy', cur[1], cur[2], cur[3]}
  end
  redis.call('HSET', KEYS[1], 'exp', exp, 'ttl', ARGV[2])
  return {'ok', cur[2], exp}
end
local token = string.format('%.0f', high_water(KEYS[2], KEYS[1]) + 1)
redis.call('SET', KEYS[2], token)
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'token', token, 'exp', exp, 'ttl', ARGV[2])
return {'ok', token, exp}
