-- KEYS: version, policy. ARGV: fence_required ('1'|'0'). -> 1 set | 0 not registered
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[2], 'fence_required', ARGV[1])
return 1
