--! uses: now high_water
-- KEYS: lease, fence. ARGV: owner, token, ttl ms.
-- -> {'ok', token, exp} | {'lost', 'superseded'|'released'|'expired', high_water} (LeaseLoss)
local cur = redis.call('HMGET', KEYS[1], 'owner', 'token', 'exp')
local hw = high_water(KEYS[2], KEYS[1])
local reason = nil
if not cur[1] or cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] then
  if tonumber(ARGV[2]) < hw then
    reason = 'superseded'
  else
    reason = 'released'
  end
elseif tonumber(cur[3]) <= now then
  reason = 'expired'
end
if reason then
  return {'lost', reason, string.format('%.0f', hw)}
end
local exp = string.format('%.0f', now + tonumber(ARGV[3]))
redis.call('HSET', KEYS[1], 'exp', exp, 'ttl', ARGV[3])
return {'ok', cur[2], exp}
