// What every call that takes a lease does first: check its input, then register the resource
// (empty state) so a session on it works, giving it `policy` when one is asked for.
#pragma once

#include <optional>
#include <string>

#include <asio/awaitable.hpp>

#include <statepact/backend.hpp>
#include <statepact/detail/validate.hpp>
#include <statepact/types.hpp>

namespace statepact::detail {

// All input is checked before anything is registered: bad input must change nothing.
// register_resource never changes an existing resource, so an explicit policy is then set.
template <Backend B>
asio::awaitable<void> register_for_lease(B& backend, const std::string& resource,
                                         const std::string& owner, milliseconds ttl,
                                         std::optional<ResourcePolicy> policy) {
  validate_name("resource name", resource);
  validate_name("owner", owner);
  validate_ttl(ttl);
  const ResourcePolicy initial = policy.value_or(ResourcePolicy{});
  const bool created = co_await backend.register_resource(resource, Value::object(), initial);
  if (policy && !created) co_await backend.set_resource_policy(resource, *policy);
}

}  // namespace statepact::detail
