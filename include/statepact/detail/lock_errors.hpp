// The two ways a pessimistic lock wait fails, worded once for every backend.
#pragma once

#include <string>

#include <fmt/format.h>

#include <statepact/commit_request.hpp>
#include <statepact/errors.hpp>
#include <statepact/types.hpp>

namespace statepact::detail {

// "a shared lock", "an exclusive lock".
inline const char* a_lock_of(LockMode m) {
  return m == LockMode::shared ? "a shared lock" : "an exclusive lock";
}

inline DeadlockError lock_deadlock(LockMode mode, const std::string& resource,
                                   const std::string& key) {
  return DeadlockError(
      fmt::format("deadlock: waiting for {} on resource '{}' key '{}' would close a wait cycle",
                  a_lock_of(mode), resource, key));
}

inline LockTimeoutError lock_timed_out(milliseconds timeout, LockMode mode,
                                       const std::string& resource, const std::string& key) {
  return LockTimeoutError(
      fmt::format("timed out after {} ms waiting for {} on resource '{}' key '{}'", timeout.count(),
                  a_lock_of(mode), resource, key));
}

}  // namespace statepact::detail
