// The Lua scripts the backend runs (EVALSHA, loaded on first use, EVAL after NOSCRIPT). Each
// operation is one script, so each is atomic and one round trip. Time is the server's: TIME.
// Names and values always arrive as ARGV, never spliced into the script text.
#pragma once

namespace statepact::detail::scripts {

#define STATEPACT_REDIS_NOW        \
  "local t = redis.call('TIME')\n" \
  "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"

// The high-water mark is the larger of the fence counter and the token in the lease hash: a fence
// key that vanished (an operator's DEL, a restore, eviction) must never let a token be issued
// twice or a stale token pass. A released lease keeps its token in the hash for the same reason.
#define STATEPACT_REDIS_HIGH_WATER                                        \
  "local function high_water(fence_key, lease_key)\n"                     \
  "  local f = tonumber(redis.call('GET', fence_key) or '0')\n"           \
  "  local l = tonumber(redis.call('HGET', lease_key, 'token') or '0')\n" \
  "  if l > f then return l end\n"                                        \
  "  return f\n"                                                          \
  "end\n"

// KEYS: lease, fence. ARGV: owner, ttl ms.
// -> {'ok', token, exp} | {'busy', holder, token, exp}
inline constexpr const char* acquire = STATEPACT_REDIS_NOW STATEPACT_REDIS_HIGH_WATER R"lua(
local ttl = tonumber(ARGV[2])
local exp = string.format('%.0f', now + ttl)
local cur = redis.call('HMGET', KEYS[1], 'owner', 'token', 'exp')
if cur[1] and tonumber(cur[3]) > now then
  if cur[1] ~= ARGV[1] then
    return {'busy', cur[1], cur[2], cur[3]}
  end
  redis.call('HSET', KEYS[1], 'exp', exp, 'ttl', ARGV[2])
  return {'ok', cur[2], exp}
end
local token = string.format('%.0f', high_water(KEYS[2], KEYS[1]) + 1)
redis.call('SET', KEYS[2], token)
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'token', token, 'exp', exp, 'ttl', ARGV[2])
return {'ok', token, exp}
)lua";

// KEYS: lease, fence. ARGV: owner, token, ttl ms.
// -> {'ok', token, exp} | {'lost', reason, high_water}
inline constexpr const char* renew = STATEPACT_REDIS_NOW STATEPACT_REDIS_HIGH_WATER R"lua(
local cur = redis.call('HMGET', KEYS[1], 'owner', 'token', 'exp')
local hw = high_water(KEYS[2], KEYS[1])
local reason = nil
if not cur[1] or cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] then
  if tonumber(ARGV[2]) < hw then
    reason = 'superseded by a newer token'
  else
    reason = 'lease was released'
  end
elseif tonumber(cur[3]) <= now then
  reason = 'lease expired before renewal'
end
if reason then
  return {'lost', reason, string.format('%.0f', hw)}
end
local exp = string.format('%.0f', now + tonumber(ARGV[3]))
redis.call('HSET', KEYS[1], 'exp', exp, 'ttl', ARGV[3])
return {'ok', cur[2], exp}
)lua";

// KEYS: lease. ARGV: owner, token. -> 1 released | 0 not the current owner
// The token stays in the hash (owner gone = free): a second floor under the fence counter.
inline constexpr const char* release = R"lua(
local cur = redis.call('HMGET', KEYS[1], 'owner', 'token')
if cur[1] == ARGV[1] and cur[2] == ARGV[2] then
  redis.call('HDEL', KEYS[1], 'owner', 'exp', 'ttl')
  return 1
end
return 0
)lua";

// KEYS: fence, lease. -> the high-water mark (0: no token was ever issued)
inline constexpr const char* fence = STATEPACT_REDIS_HIGH_WATER R"lua(
return string.format('%.0f', high_water(KEYS[1], KEYS[2]))
)lua";

// KEYS: version, state, policy. ARGV: fence_required ('1'|'0'), then key, encoded entry, ...
// -> 1 created | 0 exists (left as it is, policy included)
inline constexpr const char* register_resource = R"lua(
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('SET', KEYS[1], '0')
redis.call('HSET', KEYS[3], 'fence_required', ARGV[1])
for i = 2, #ARGV, 2 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
end
return 1
)lua";

// KEYS: version, policy. ARGV: fence_required ('1'|'0'). -> 1 set | 0 not registered
inline constexpr const char* set_policy = R"lua(
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[2], 'fence_required', ARGV[1])
return 1
)lua";

// KEYS: version, policy. -> {'ok', fence_required or nil} | {'resource_not_found'}
inline constexpr const char* get_policy = R"lua(
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'resource_not_found'}
end
return {'ok', redis.call('HGET', KEYS[2], 'fence_required')}
)lua";

// KEYS: version, state. ARGV: key. -> {'ok', entry or nil} | {'resource_not_found'}
inline constexpr const char* read = R"lua(
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'resource_not_found'}
end
return {'ok', redis.call('HGET', KEYS[2], ARGV[1])}
)lua";

// KEYS: version, state per resource. -> {'ok', version, {k, entry, ...}, ...} | {'resource_not_found', i}
inline constexpr const char* snapshot = R"lua(
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
)lua";

// KEYS: version per resource. -> index of the first missing one, or 0
inline constexpr const char* exists = R"lua(
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 0 then
    return i
  end
end
return 0
)lua";

// KEYS: lock, version, state. ARGV: owner, mode ('S'|'X'), lock ttl ms, key.
// -> {'ok', entry or nil} | {'wait', holder, ...} | {'resource_not_found'}
// Every key in the resource's slot. A request that must wait gets the holders it waits for; the
// client then records that in the wait-for graph (the wait script).
inline constexpr const char* lock = STATEPACT_REDIS_NOW R"lua(
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
)lua";

// KEYS: the wait-for graph (one hash for every lock owner: owner -> "<exp ms> <holder> ..."), a
// single key, so the walk reads only what it names. ARGV: owner, wait ttl ms, holders waited for.
// -> 'wait' | 'deadlock'
// Records the owner's edges, then follows holders -> the holders they wait for; reaching the owner
// again means waiting would never end (its record is then removed). Records past their expiry (a
// crashed waiter's) are skipped and removed.
inline constexpr const char* wait = STATEPACT_REDIS_NOW R"lua(
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
)lua";

// KEYS: lock keys. ARGV: owner. Releases the owner's locks.
inline constexpr const char* unlock = R"lua(
for i = 1, #KEYS do
  redis.call('HDEL', KEYS[i], ARGV[1])
end
return 1
)lua";

// The layout of KEYS, ARGV and the reply is described in commit_codec.hpp, which builds the call
// and reads the answer. Checks everything before writing anything, in the memory backend's order.
// The result is JSON-encoded only to be stored with an idempotency key.
inline constexpr const char* commit = STATEPACT_REDIS_HIGH_WATER R"lua(
-- ARGV's header slots: the same names and numbers as CommitArg in commit_codec.hpp.
local HAS_KEY, FINGERPRINT, RETENTION_MS, RESOURCE_COUNT, FENCE_COUNT, CHECK_COUNT, WRITE_COUNT, LOCK_COUNT, LOCK_OWNER, POLICY_COUNT = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
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
for w = 1, nw do
  local ri, key, kind, json = tonumber(ARGV[a + 1]), ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  a = a + 4
  local v = versions[ri]
  if not v then
    v = string.format('%.0f', redis.call('INCR', version_key(ri)))
    versions[ri] = v
    result[resource_name(ri)] = tonumber(v)
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
)lua";

// ---- inspection (statepactctl) --------------------------------------------------------------

// KEYS: lease keys. -> {now ms, {owner, token, exp, ttl} per key} (owner nil: released or never)
inline constexpr const char* lease_info = STATEPACT_REDIS_NOW R"lua(
local out = {string.format('%.0f', now)}
for i = 1, #KEYS do
  out[#out + 1] = redis.call('HMGET', KEYS[i], 'owner', 'token', 'exp', 'ttl')
end
return out
)lua";

// KEYS: version and policy per resource. -> {version or nil, fence_required or nil} per resource
inline constexpr const char* resource_info = R"lua(
local out = {}
for i = 1, #KEYS, 2 do
  out[#out + 1] = {redis.call('GET', KEYS[i]), redis.call('HGET', KEYS[i + 1], 'fence_required')}
end
return out
)lua";

// KEYS: lease, fence. -> {'revoked', owner, token, exp, ttl, new fence} | {'none'}
// Ends the current lease (live, or expired and not taken over) and moves the fence past it in one
// step. Both keys get the new mark, so either alone keeps it, as acquire does.
inline constexpr const char* revoke = STATEPACT_REDIS_HIGH_WATER R"lua(
local cur = redis.call('HMGET', KEYS[1], 'owner', 'token', 'exp', 'ttl')
if not cur[1] then
  return {'none'}
end
local fence = string.format('%.0f', high_water(KEYS[2], KEYS[1]) + 1)
redis.call('SET', KEYS[2], fence)
redis.call('HSET', KEYS[1], 'token', fence)
redis.call('HDEL', KEYS[1], 'owner', 'exp', 'ttl')
return {'revoked', cur[1], cur[2], cur[3], cur[4], fence}
)lua";

#undef STATEPACT_REDIS_NOW
#undef STATEPACT_REDIS_HIGH_WATER

}  // namespace statepact::detail::scripts
