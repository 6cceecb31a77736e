-- KEYS: version, state per resource. -> {'ok', version, {k, entry, ...}, ...} | {'resource_not_found', i}
local out = {'ok'}
for i = 1, #KEYS, 2 do
  local v = redis.call('GET', KEYS[i])
  if not v then
    return {'resource_not_found', tostring((i + 1) / 2)}
  end
  out[#out + 1] = v
  out[#out + 1] = redis.call('HGETALL', KEYS[i + 1])
end
return out
