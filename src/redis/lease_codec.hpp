// The lease scripts' calls and answers, without I/O: encode_* lays an operation out as its
// script's KEYS and ARGV (the layout each script's header comment gives), decode_* reads the reply
// back as an answer of the shared vocabulary (detail/verdicts.hpp). A reply the script never gives
// is a non-retryable statepact::Error ("unexpected reply").
#pragma once

#include <optional>
#include <string>

#include <statepact/detail/verdicts.hpp>
#include <statepact/inspect.hpp>
#include <statepact/types.hpp>

#include "key_layout.hpp"
#include "reply.hpp"
#include "script_call.hpp"

namespace statepact::detail {

// acquire.lua: {'ok', token, exp} | {'busy', holder, token, exp}
ScriptCall encode_acquire(const KeyLayout& layout, const std::string& resource,
                          const std::string& owner, milliseconds ttl);
AcquireAnswer decode_acquire(const RedisReply& reply, const std::string& resource,
                             const std::string& owner, milliseconds ttl);

// renew.lua: {'ok', token, exp} | {'lost', LeaseLoss, high-water}
ScriptCall encode_renew(const KeyLayout& layout, const Lease& lease, milliseconds ttl);
RenewAnswer decode_renew(const RedisReply& reply, const Lease& lease, milliseconds ttl);

// release.lua: 1 released | 0 not the current owner's lease
ScriptCall encode_release(const KeyLayout& layout, const Lease& lease);
bool decode_release(const RedisReply& reply);

// fence.lua: the high-water mark
ScriptCall encode_fence(const KeyLayout& layout, const std::string& resource);
Token decode_fence(const RedisReply& reply);

// revoke.lua: {'revoked', owner, token, exp, ttl, new fence} | {'none'}
ScriptCall encode_revoke(const KeyLayout& layout, const std::string& resource);
std::optional<RevokedLease> decode_revoke(const RedisReply& reply, const std::string& resource);

// lease_info.lua, for each lease hash: HMGET owner token exp ttl; empty unless live at `now_ms`.
std::optional<LeaseInfo> decode_live_lease(const RedisReply& fields, const std::string& resource,
                                           std::uint64_t now_ms);

}  // namespace statepact::detail
