-- KEYS: version, state, policy. ARGV: fence_required ('1'|'0'), then key, encoded entry, ...
-- -> 1 created | 0 exists (left as it is, policy included)
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('SET', KEYS[1], '0')
redis.call('HSET', KEYS[3], 'fence_required', ARGV[1])
for i = 2, #ARGV, 2 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
end
return 1
