--! uses: now
-- KEYS: lock, version, state. ARGV: owner, mode ('S'|'X'), lock ttl ms, key.
-- -> {'ok', entry or nil} | {'wait', holder, ...} | {'resource_not_found'}
-- Every key in the resource's slot. A request that must wait gets the holders it waits for; the
-- client then records that in the wait-for graph (the wait script).
if redis.call('EXISTS', KEYS[2]) == 0 then
  return {'resource_not_found'}
end
local me, mode = ARGV[1], ARGV[2]
local others, exclusive, mine = {}, false, nil
local h = redis.call('HGETALL', KEYS[1])
for i = 1, #h, 2 do
  local m, e = string.sub(h[i + 1], 1, 1), tonumber(string.sub(h[i + 1], 3))
  if e <= now then
    redis.call('HDEL', KEYS[1], h[i])
  elseif h[i] == me then
    mine = m
  else
    others[#others + 1] = h[i]
    if m == 'X' then
      exclusive = true
    end
  end
end
local grant
if mine == 'X' then
  grant = true
elseif mode == 'S' then
  grant = not exclusive
else
  grant = #others == 0
end
if not grant then
  local out = {'wait'}
  for _, x in ipairs(others) do
    out[#out + 1] = x
  end
  return out
end
local m = mode
if mine == 'X' then
  m = 'X'
end
local ttl = tonumber(ARGV[3])
redis.call('HSET', KEYS[1], me, m .. ':' .. string.format('%.0f', now + ttl))
if redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return {'ok', redis.call('HGET', KEYS[3], ARGV[4])}
