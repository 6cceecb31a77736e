// The error hierarchy. Every error says whether re-running the whole transaction on
// fresh state may succeed (`retryable()`), and carries the names and tokens a reader needs.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include <statepact/types.hpp>

namespace statepact {

enum class ErrorCode {
  conflict,
  deadlock,
  lock_timeout,
  backend_unavailable,
  commit_unknown,
  lease_lost,
  lease_not_available,
  invalid_argument,
  resource_not_found,
  idempotency_key_reused,
  fence_required,
  configuration,
};

inline const char* to_string(ErrorCode c) {
  switch (c) {
    case ErrorCode::conflict:
      return "conflict";
    case ErrorCode::deadlock:
      return "deadlock";
    case ErrorCode::lock_timeout:
      return "lock_timeout";
    case ErrorCode::backend_unavailable:
      return "backend_unavailable";
    case ErrorCode::commit_unknown:
      return "commit_unknown";
    case ErrorCode::lease_lost:
      return "lease_lost";
    case ErrorCode::lease_not_available:
      return "lease_not_available";
    case ErrorCode::invalid_argument:
      return "invalid_argument";
    case ErrorCode::resource_not_found:
      return "resource_not_found";
    case ErrorCode::idempotency_key_reused:
      return "idempotency_key_reused";
    case ErrorCode::fence_required:
      return "fence_required";
    case ErrorCode::configuration:
      return "configuration";
  }
  return "?";
}

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& what) : std::runtime_error(what), code_(code) {}
  ErrorCode code() const noexcept { return code_; }
  virtual bool retryable() const noexcept { return false; }

 private:
  ErrorCode code_;
};

// Validation failed at commit: re-run the whole transaction on fresh data.
class ConflictError : public Error {
 public:
  ConflictError(std::string resource, std::string key, Version expected, Version found)
      : Error(ErrorCode::conflict,
              fmt::format("conflict on resource '{}' key '{}': expected version {}, found {}",
                          resource, key, expected, found)),
        resource_(std::move(resource)),
        key_(std::move(key)),
        expected_(expected),
        found_(found) {}
  bool retryable() const noexcept override { return true; }
  const std::string& resource() const noexcept { return resource_; }
  const std::string& key() const noexcept { return key_; }
  Version expected_version() const noexcept { return expected_; }
  Version found_version() const noexcept { return found_; }

 private:
  std::string resource_, key_;
  Version expected_, found_;
};

class DeadlockError : public Error {
 public:
  explicit DeadlockError(const std::string& what) : Error(ErrorCode::deadlock, what) {}
  bool retryable() const noexcept override { return true; }
};

class LockTimeoutError : public Error {
 public:
  explicit LockTimeoutError(const std::string& what) : Error(ErrorCode::lock_timeout, what) {}
  bool retryable() const noexcept override { return true; }
};

// The connection failed before anything was sent: nothing happened, retrying is safe.
class BackendUnavailableError : public Error {
 public:
  explicit BackendUnavailableError(const std::string& what)
      : Error(ErrorCode::backend_unavailable, what) {}
  bool retryable() const noexcept override { return true; }
};

// The connection was lost after the commit was sent: it may or may not have been applied. Only a
// commit with an idempotency key may be re-sent, because a replay then applies nothing twice.
class CommitUnknownError : public Error {
 public:
  CommitUnknownError(const std::string& what, bool has_idempotency_key)
      : Error(ErrorCode::commit_unknown, what), idempotent_(has_idempotency_key) {}
  bool retryable() const noexcept override { return idempotent_; }
  bool has_idempotency_key() const noexcept { return idempotent_; }

 private:
  bool idempotent_;
};

// The caller's token is older than the storage's high-water mark, or the lease expired or was
// superseded. Never retryable: retrying with the same token is wrong; stop, re-acquire, re-read.
// From a lease operation, `owner()` is the lease's owner; from a commit, storage cannot know who
// held the stale token, so `owner()` is empty and `agent_id()` names the session's agent.
class LeaseLostError : public Error {
 public:
  LeaseLostError(std::string resource, std::string owner, Token token, Token current_fence,
                 const std::string& reason)
      : Error(ErrorCode::lease_lost,
              fmt::format(
                  "lease lost on resource '{}' by owner '{}' (token {}, current fence {}): {}",
                  resource, owner, token, current_fence, reason)),
        resource_(std::move(resource)),
        owner_(std::move(owner)),
        token_(token),
        current_fence_(current_fence) {}

  // A commit refused because its fence token is older than the resource's current fence.
  static LeaseLostError fenced_commit(std::string resource, std::string agent_id, Token token,
                                      Token current_fence) {
    // The message first: arguments are evaluated in no fixed order, and two are moved from.
    std::string what = fmt::format(
        "commit by agent '{}' fenced off on resource '{}': its token {} is older "
        "than the current fence {}; stop, re-acquire the lease and re-read",
        agent_id, resource, token, current_fence);
    return LeaseLostError(what, std::move(resource), std::move(agent_id), token, current_fence);
  }

  const std::string& resource() const noexcept { return resource_; }
  // The lease's owner; empty when the error comes from a commit.
  const std::string& owner() const noexcept { return owner_; }
  // The agent whose session carried the stale token; empty for lease operations.
  const std::string& agent_id() const noexcept { return agent_id_; }
  Token token() const noexcept { return token_; }
  Token current_fence() const noexcept { return current_fence_; }

 private:
  LeaseLostError(const std::string& what, std::string resource, std::string agent_id, Token token,
                 Token current_fence)
      : Error(ErrorCode::lease_lost, what),
        resource_(std::move(resource)),
        agent_id_(std::move(agent_id)),
        token_(token),
        current_fence_(current_fence) {}

  std::string resource_, owner_, agent_id_;
  Token token_, current_fence_;
};

// A write to a resource whose policy requires a fence token, from a session that carried none for
// it. Never retryable: open the session with .fence(lease.token) for that resource.
class FenceRequiredError : public Error {
 public:
  FenceRequiredError(std::string resource, std::string agent_id)
      : Error(ErrorCode::fence_required,
              fmt::format("resource '{}' requires a fence token for every write, and the commit "
                          "of agent '{}' carried none for it; hold its lease and open the session "
                          "with .fence(lease.token)",
                          resource, agent_id)),
        resource_(std::move(resource)),
        agent_id_(std::move(agent_id)) {}
  const std::string& resource() const noexcept { return resource_; }
  const std::string& agent_id() const noexcept { return agent_id_; }

 private:
  std::string resource_, agent_id_;
};

// Another owner holds a live lease. Wait or back off; never force.
class LeaseNotAvailableError : public Error {
 public:
  LeaseNotAvailableError(std::string resource, std::string requester, std::string holder,
                         Token holder_token, time_point holder_expires_at)
      : Error(ErrorCode::lease_not_available,
              fmt::format("lease on resource '{}' not available to '{}': held by '{}' (token {})",
                          resource, requester, holder, holder_token)),
        resource_(std::move(resource)),
        holder_(std::move(holder)),
        holder_token_(holder_token),
        holder_expires_at_(holder_expires_at) {}
  const std::string& resource() const noexcept { return resource_; }
  const std::string& holder() const noexcept { return holder_; }
  Token holder_token() const noexcept { return holder_token_; }
  // The backend's clock: compare only with other backend times.
  time_point holder_expires_at() const noexcept { return holder_expires_at_; }

 private:
  std::string resource_, holder_;
  Token holder_token_;
  time_point holder_expires_at_;
};

class InvalidArgumentError : public Error {
 public:
  explicit InvalidArgumentError(const std::string& what)
      : Error(ErrorCode::invalid_argument, what) {}
};

class ResourceNotFoundError : public Error {
 public:
  explicit ResourceNotFoundError(std::string resource)
      : Error(ErrorCode::resource_not_found,
              fmt::format("resource '{}' is not registered", resource)),
        resource_(std::move(resource)) {}
  const std::string& resource() const noexcept { return resource_; }

 private:
  std::string resource_;
};

class IdempotencyKeyReusedError : public Error {
 public:
  explicit IdempotencyKeyReusedError(const std::string& key)
      : Error(ErrorCode::idempotency_key_reused,
              fmt::format("idempotency key '{}' was already used for a different commit", key)) {}
};

// The server or its settings refuse this client, or would make it unsafe: authentication,
// permissions, a missing database or schema, a setting safety depends on (a Redis that may evict
// keys). Never retryable: the message says what to fix, and nothing was applied.
class ConfigurationError : public Error {
 public:
  explicit ConfigurationError(const std::string& what) : Error(ErrorCode::configuration, what) {}
};

// Misuse of the API (a session used after commit or abort): a bug in the caller, not a state error.
class UsageError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

}  // namespace statepact
