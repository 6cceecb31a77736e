--! uses: now high_water
-- KEYS: lease, fence; for a name with a group on one server, then the lease and fence keys that
-- versions before the grouped key form wrote for it (key_layout.hpp). ARGV: owner, ttl ms.
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
local hw = high_water(KEYS[2], KEYS[1])
if KEYS[4] then
  -- A client of an earlier version may still use the earlier form: its live lease is another
  -- owner's, and tokens go on above its mark, so no token is issued twice across the two forms.
  local old = redis.call('HMGET', KEYS[3], 'owner', 'token', 'exp')
  if old[1] and tonumber(old[3]) > now then
    return {'busy', old[1], old[2], old[3]}
  end
  local old_hw = high_water(KEYS[4], KEYS[3])
  if old_hw > hw then
    hw = old_hw
  end
end
local token = string.format('%.0f', hw + 1)
redis.call('SET', KEYS[2], token)
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'token', token, 'exp', exp, 'ttl', ARGV[2])
return {'ok', token, exp}
