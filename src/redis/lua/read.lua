-- KEYS: version, state. ARGV: key. -> {'ok', entry or nil} | {'resource_not_found'}
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'resource_not_found'}
end
return {'ok', redis.call('HGET', KEYS[2], ARGV[1])}
