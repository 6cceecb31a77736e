--! uses: now
-- KEYS: the wait-for graph (one hash for every lock owner: owner -> "<exp ms> <holder> ..."), a
-- single key, so the walk reads only what it names. ARGV: owner, wait ttl ms, holders waited for.
-- -> 'wait' | 'deadlock'
-- Records the owner's edges, then follows holders -> the holders they wait for; reaching the owner
-- again means waiting would never end (its record is then removed). Records past their expiry (a
-- crashed waiter's) are skipped and removed.
local me = ARGV[1]
local edges = {string.format('%.0f', now + tonumber(ARGV[2]))}
for i = 3, #ARGV do
  edges[#edges + 1] = ARGV[i]
end
redis.call('HSET', KEYS[1], me, table.concat(edges, ' '))
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
