-- KEYS: version and policy per resource. -> {version or nil, fence_required or nil} per resource
local out = {}
for i = 1, #KEYS, 2 do
  out[#out + 1] = {redis.call('GET', KEYS[i]), redis.call('HGET', KEYS[i + 1], 'fence_required')}
end
return out
