--! uses: now
-- KEYS: lease keys. -> {now ms, {owner, token, exp, ttl} per key} (owner nil: released or never)
local out = {string.format('%.0f', now)}
for i = 1, #KEYS do
  out[#out + 1] = redis.call('HMGET', KEYS[i], 'owner', 'token', 'exp', 'ttl')
end
return out
