// The state and lock scripts' calls and answers, without I/O, as lease_codec.hpp does for leases.
// A state entry is stored as "<version> <json>" (a value) or "<version>" (a tombstone).
#pragma once

#include <string>
#include <variant>
#include <vector>

#include <statepact/commit_request.hpp>
#include <statepact/detail/verdicts.hpp>
#include <statepact/inspect.hpp>
#include <statepact/types.hpp>

#include "key_layout.hpp"
#include "reply.hpp"
#include "script_call.hpp"

namespace statepact::detail {

// A stored entry; nil: never written.
Entry decode_entry(const RedisReply& stored);

// register_resource.lua: 1 created | 0 already registered | -1 registered in the key form of
// versions before the grouped form only: ConfigurationError (run the key-layout upgrade)
ScriptCall encode_register(const KeyLayout& layout, const std::string& name, const Value& state,
                           ResourcePolicy policy);
bool decode_register(const RedisReply& reply, const std::string& name);

// set_policy.lua: 1 set | 0 not registered
ScriptCall encode_set_policy(const KeyLayout& layout, const std::string& name,
                             ResourcePolicy policy);
Found<std::monostate> decode_set_policy(const RedisReply& reply, const std::string& name);

// get_policy.lua: {'ok', fence_required or nil} | {'resource_not_found'}
ScriptCall encode_policy(const KeyLayout& layout, const std::string& name);
Found<ResourcePolicy> decode_policy(const RedisReply& reply, const std::string& name);

// read.lua: {'ok', entry or nil} | {'resource_not_found'}
ScriptCall encode_read(const KeyLayout& layout, const std::string& resource,
                       const std::string& key);
Found<Entry> decode_read(const RedisReply& reply, const std::string& resource);

// snapshot.lua: {'ok', version, {key, entry, ...}, ...} | {'resource_not_found', i}
ScriptCall encode_snapshot(const KeyLayout& layout, const std::vector<std::string>& resources);
Found<std::vector<ResourceSnapshot>> decode_snapshot(const RedisReply& reply,
                                                     const std::vector<std::string>& resources);

// exists.lua: the 1-based index of the first resource not registered, or 0
ScriptCall encode_exists(const KeyLayout& layout, const std::vector<std::string>& resources);
Found<std::monostate> decode_exists(const RedisReply& reply,
                                    const std::vector<std::string>& resources);

// resource_info.lua: {version or nil, fence_required or nil} per resource; empty entries for
// resources deleted since they were listed.
ScriptCall encode_resource_info(const KeyLayout& layout, const std::vector<std::string>& names);
std::vector<std::optional<ResourceInfo>> decode_resource_info(
    const RedisReply& reply, const std::vector<std::string>& names);

// lock.lua: {'ok', entry or nil} | {'wait', blocker, ...} | {'resource_not_found'}
// `record_ttl` bounds how long a crashed client's lock record outlives it; `queue_ttl` how long a
// crashed waiter keeps its place in the key's queue (each poll renews it).
ScriptCall encode_lock(const KeyLayout& layout, const std::string& owner,
                       const std::string& resource, const std::string& key, LockMode mode,
                       milliseconds record_ttl, milliseconds queue_ttl);
LockAnswer decode_lock(const RedisReply& reply);

// wait.lua, after a 'wait': records whom `owner` waits for and walks the wait-for graph.
// -> 'wait' | 'deadlock'
ScriptCall encode_wait(const KeyLayout& layout, const std::string& owner,
                       const std::vector<std::string>& holders, milliseconds record_ttl);
Verdict decode_wait(const RedisReply& reply);

// unlock.lua: releases `owner`'s locks (fire and forget).
ScriptCall encode_unlock(std::vector<std::string> lock_keys, const std::string& owner);

}  // namespace statepact::detail
