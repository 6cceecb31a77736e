-- KEYS: lock keys. ARGV: owner. Releases the owner's locks.
for i = 1, #KEYS do
  redis.call('HDEL', KEYS[i], ARGV[1])
end
return 1
