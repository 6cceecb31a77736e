-- KEYS: the resource's fence key in the grouped form, then one (earlier key, grouped key) pair per
-- key found. ARGV: each pair's kind (lease, fence, version, ...). -> {moved, kind left, ...}
-- Moves one grouped resource's keys from the form earlier versions wrote to the grouped form
-- (RENAME keeps a key's expiry). A key whose grouped form already exists (this version used the
-- resource before the upgrade) stays where it is, and its kind is returned; but the grouped fence
-- ends at least at the earlier high-water mark, so no token is issued twice either way.
local hw = 0
for i = 1, #ARGV do
  local old = KEYS[2 * i]
  local t = 0
  if ARGV[i] == 'fence' then
    t = tonumber(redis.call('GET', old) or '0')
  elseif ARGV[i] == 'lease' then
    t = tonumber(redis.call('HGET', old, 'token') or '0')
  end
  if t > hw then
    hw = t
  end
end
local moved, out = 0, {}
for i = 1, #ARGV do
  local old, new = KEYS[2 * i], KEYS[2 * i + 1]
  if redis.call('EXISTS', old) == 1 then
    if redis.call('EXISTS', new) == 0 then
      redis.call('RENAME', old, new)
      moved = moved + 1
    elseif ARGV[i] == 'fence' then
      redis.call('DEL', old)  -- its mark is in hw, written below
      moved = moved + 1
    else
      out[#out + 1] = ARGV[i]
    end
  end
end
if hw > tonumber(redis.call('GET', KEYS[1]) or '0') then
  redis.call('SET', KEYS[1], string.format('%.0f', hw))
end
table.insert(out, 1, tostring(moved))
return out
