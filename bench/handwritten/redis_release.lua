-- A lease release by hand: delete the lease only while the caller still holds it with the same
-- token (the fence counter keeps the newest token). KEYS: lease. ARGV: owner, token. -> 1 or 0.
local h = redis.call('HMGET', KEYS[1], 'owner', 'token')
if h[1] ~= ARGV[1] or h[2] ~= ARGV[2] then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
