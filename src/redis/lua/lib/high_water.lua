-- The high-water mark is the larger of the fence counter and the token in the lease hash: a fence
-- key that vanished (an operator's DEL, a restore, eviction) must never let a token be issued
-- twice or a stale token pass. A released lease keeps its token in the hash for the same reason.
local function high_water(fence_key, lease_key)
  local f = tonumber(redis.call('GET', fence_key) or '0')
  local l = tonumber(redis.call('HGET', lease_key, 'token') or '0')
  if l > f then return l end
  return f
end
