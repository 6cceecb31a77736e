--! uses: now
-- KEYS: the wait-for graph (one hash for every lock owner: owner -> "<exp ms> <holder> ...", and
-- 'sweep' -> when expired records were last removed), a single key, so the walk reads only what
-- it names. ARGV: owner, wait ttl ms, holders waited for. -> 'wait' | 'deadlock'
-- Records the owner's edges, then follows holders -> the holders they wait for; reaching the owner
-- again means waiting would never end (its record is then removed). Records past their expiry (a
-- crashed waiter's) are skipped and removed.
local me, ttl = ARGV[1], tonumber(ARGV[2])
local edges = {string.format('%.0f', now + ttl)}
for i = 3, #ARGV do
  edges[#edges + 1] = ARGV[i]
end
redis.call('HSET', KEYS[1], me, table.concat(edges, ' '))
-- A crashed waiter's record must go even where no walk reaches it: the hash expires a ttl after
-- the last wait, and while waits go on, one per ttl removes every record past its expiry. So a
-- record is gone at most three ttls after its owner's last poll.
if redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
if tonumber(redis.call('HGET', KEYS[1], 'sweep') or '0') + ttl <= now then
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do
    local exp = tonumber(string.match(all[i + 1], '^%d+'))
    if all[i] ~= 'sweep' and exp and exp <= now then
      redis.call('HDEL', KEYS[1], all[i])
    end
  end
  redis.call('HSET', KEYS[1], 'sweep', string.format('%.0f', now))
end
local seen, queue, steps = {}, {}, 0
for i = 3, #ARGV do
  queue[#queue + 1] = ARGV[i]
end
while #queue > 0 and steps < 1000 do
  local h = table.remove(queue)
  steps = steps + 1
  if h == me then
    redis.call('HDEL', KEYS[1], me)
    return 'deadlock'
  end
  if not seen[h] then
    seen[h] = true
    local rec = redis.call('HGET', KEYS[1], h)
    if rec then
      local first = true
      for word in string.gmatch(rec, '%S+') do
        if first then
          first = false
          if tonumber(word) <= now then
            redis.call('HDEL', KEYS[1], h)
            break
          end
        else
          queue[#queue + 1] = word
        end
      end
    end
  end
end
return 'wait'
