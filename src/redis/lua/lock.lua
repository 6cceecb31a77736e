--! uses: now
-- KEYS: lock, version, state, queue. ARGV: owner, mode ('S'|'X'), lock ttl ms, key, queue ttl ms.
-- -> {'ok', entry or nil} | {'wait', blocker, ...} | {'resource_not_found'}
-- Every key in the resource's slot. Waiters are served in arrival order, as in the memory backend:
-- a request that must wait takes a place in the key's queue (kept by its polls, so a crashed
-- waiter's place expires), and a later request does not pass an earlier one it conflicts with.
-- Without the queue, a request arriving between a release and the waiter's next poll would take
-- the lock first, and a deadlock victim retrying at once would keep meeting the same cycle.
-- A request that must wait gets whom it waits for (conflicting holders, then conflicting waiters
-- ahead of it); the client records that in the wait-for graph (the wait script).
if redis.call('EXISTS', KEYS[2]) == 0 then
  return {'resource_not_found'}
end
local me, mode = ARGV[1], ARGV[2]
local blockers, mine = {}, nil
local h = redis.call('HGETALL', KEYS[1])
for i = 1, #h, 2 do
  local m, e = string.sub(h[i + 1], 1, 1), tonumber(string.sub(h[i + 1], 3))
  if e <= now then
    redis.call('HDEL', KEYS[1], h[i])
  elseif h[i] == me then
    mine = m
  elseif mode == 'X' or m == 'X' then
    blockers[#blockers + 1] = h[i]
  end
end
-- A holder asking again goes first: whoever queued behind it waits for it anyway.
if mine == 'X' or (mine == 'S' and mode == 'S') then
  blockers = {}
end
-- Queue entries: owner -> "<mode> <arrival ms> <expiry ms>".
local arrival = now
local ahead = {}
local q = redis.call('HGETALL', KEYS[4])
for i = 1, #q, 2 do
  local qm, qa, qe = string.match(q[i + 1], '^(%S+) (%S+) (%S+)$')
  qa, qe = tonumber(qa), tonumber(qe)
  if qe <= now then
    redis.call('HDEL', KEYS[4], q[i])
  elseif q[i] == me then
    arrival = qa
  elseif mode == 'X' or qm == 'X' then
    ahead[#ahead + 1] = {q[i], qa}
  end
end
if mine == nil then
  for _, w in ipairs(ahead) do
    if w[2] < arrival or (w[2] == arrival and w[1] < me) then
      blockers[#blockers + 1] = w[1]
    end
  end
end
if #blockers > 0 then
  local qttl = tonumber(ARGV[5])
  redis.call('HSET', KEYS[4], me, mode .. ' ' .. string.format('%.0f', arrival) .. ' ' ..
    string.format('%.0f', now + qttl))
  if redis.call('PTTL', KEYS[4]) < qttl then
    redis.call('PEXPIRE', KEYS[4], qttl)
  end
  local out = {'wait'}
  for _, x in ipairs(blockers) do
    out[#out + 1] = x
  end
  return out
end
redis.call('HDEL', KEYS[4], me)
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
