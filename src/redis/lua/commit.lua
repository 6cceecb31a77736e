--! uses: high_water
-- The layout of KEYS, ARGV and the reply is described in commit_codec.hpp, which builds the call
-- and reads the answer. Checks everything before writing anything, in the memory backend's order.
-- The result is JSON-encoded only to be stored with an idempotency key.
-- ARGV's header slots: the same names and numbers as CommitArg in commit_codec.hpp.
local HAS_KEY, FINGERPRINT, RETENTION_MS, RESOURCE_COUNT, FENCE_COUNT = 1, 2, 3, 4, 5
local CHECK_COUNT, WRITE_COUNT, LOCK_COUNT, LOCK_OWNER, POLICY_COUNT = 6, 7, 8, 9, 10
local nres, nf, nc, nw, nl = tonumber(ARGV[RESOURCE_COUNT]), tonumber(ARGV[FENCE_COUNT]),
  tonumber(ARGV[CHECK_COUNT]), tonumber(ARGV[WRITE_COUNT]), tonumber(ARGV[LOCK_COUNT])
local owner, np = ARGV[LOCK_OWNER], tonumber(ARGV[POLICY_COUNT])
-- KEYS by section, in the order commit_codec.hpp lays them out.
local record_key = KEYS[1]
local function version_key(i) return KEYS[2 * i] end
local function state_key(i) return KEYS[1 + 2 * i] end
local function fence_key(j) return KEYS[2 * nres + 2 * j] end
local function lease_key(j) return KEYS[1 + 2 * nres + 2 * j] end
local function policy_key(p) return KEYS[1 + 2 * nres + 2 * nf + p] end
local function lock_key(l) return KEYS[1 + 2 * nres + 2 * nf + np + l] end
-- ARGV after the header: resource names, fence tokens, policy resource indexes, checks, writes.
local header = POLICY_COUNT
local function resource_name(i) return ARGV[header + i] end
local function release_locks()
  for l = 1, nl do
    redis.call('HDEL', lock_key(l), owner)
  end
end
if ARGV[HAS_KEY] == '1' then
  local rec = redis.call('HMGET', record_key, 'fp', 'result')
  if rec[1] then
    if rec[1] ~= ARGV[FINGERPRINT] then
      return {'idempotency_key_reused'}
    end
    -- A replay reports the first apply, which may have come from another connection and never
    -- reached a replica: this write (the record unchanged) is replicated behind it, so WAIT on
    -- this connection covers the apply too.
    redis.call('HSET', record_key, 'fp', rec[1])
    release_locks()
    return {'ok', '1', rec[2]}
  end
end
for i = 1, nres do
  if redis.call('EXISTS', version_key(i)) == 0 then
    return {'resource_not_found', tostring(i)}
  end
end
local a = header + nres
for j = 1, nf do
  local hw = high_water(fence_key(j), lease_key(j))
  local tok = tonumber(ARGV[a + j])
  -- Stale (below the mark) or never issued (above it, or 0): the client tells which.
  if tok ~= hw or tok == 0 then
    return {'fence', tostring(j), string.format('%.0f', hw)}
  end
end
a = a + nf
-- A written resource without a fence for it: refused if its policy requires one (a fenced one
-- passed the fence check above).
for p = 1, np do
  if redis.call('HGET', policy_key(p), 'fence_required') == '1' then
    return {'fence_required', ARGV[a + p]}
  end
end
a = a + np
for k = 1, nc do
  local ri, key, expected = tonumber(ARGV[a + 1]), ARGV[a + 2], tonumber(ARGV[a + 3])
  a = a + 3
  local cur = redis.call('HGET', state_key(ri), key)
  local found = 0
  if cur then
    found = tonumber(string.match(cur, '^%d+'))
  end
  if found ~= expected then
    return {'conflict', tostring(k), string.format('%.0f', found)}
  end
end
local versions, result, reply = {}, {}, {'ok', '0', ''}
for _ = 1, nw do
  local ri, key, kind, json = tonumber(ARGV[a + 1]), ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  a = a + 4
  local v = versions[ri]
  if not v then
    v = string.format('%.0f', redis.call('INCR', version_key(ri)))
    versions[ri] = v
    -- Kept as text: cjson writes numbers with 14 significant digits.
    result[resource_name(ri)] = v
    reply[#reply + 1] = resource_name(ri)
    reply[#reply + 1] = v
  end
  if kind == 'v' then
    redis.call('HSET', state_key(ri), key, v .. ' ' .. json)
  else
    redis.call('HSET', state_key(ri), key, v)
  end
end
if ARGV[HAS_KEY] == '1' then
  redis.call('HSET', record_key, 'fp', ARGV[FINGERPRINT], 'result', cjson.encode(result))
  redis.call('PEXPIRE', record_key, ARGV[RETENTION_MS])
end
release_locks()
return reply
