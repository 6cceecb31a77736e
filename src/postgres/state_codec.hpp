// The state and lock functions' answers, read without libpqxx, as lease_codec.hpp does for
// leases.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <statepact/detail/verdicts.hpp>
#include <statepact/inspect.hpp>
#include <statepact/types.hpp>

#include "row.hpp"

namespace statepact::detail::pg {

// statepact_register: true when created, false when it already existed.
bool decode_register(const Rows& rows);

// statepact_set_policy: false when the resource is not registered.
Found<std::monostate> decode_set_policy(const Rows& rows, const std::string& name);

// statepact_policy: fence_required, NULL when the resource is not registered.
Found<ResourcePolicy> decode_policy(const Rows& rows, const std::string& name);

// statepact_read: (registered, value, version).
Found<Entry> decode_read(const Rows& rows, const std::string& resource);

// statepact_snapshot: (resource, registered, resource version, key, value, version), a row per
// key (or one with key NULL for a resource without keys), resources in the order asked.
Found<std::vector<ResourceSnapshot>> decode_snapshot(const Rows& rows,
                                                     const std::vector<std::string>& resources);

// statepact_missing: the first resource not registered, or NULL.
Found<std::monostate> decode_missing(const Rows& rows);

// statepact_list_resources: (name, version, fence_required), filtered by `glob`.
std::vector<ResourceInfo> decode_list_resources(const Rows& rows,
                                                const std::optional<std::string>& glob);

// statepact_lock: (status 'ok'|'resource_not_found'|'deadlock'|'timeout'|'cancelled', value,
// version).
LockAnswer decode_lock(const Rows& rows);

}  // namespace statepact::detail::pg
