/// @file
/// The error hierarchy. Every error says whether re-running the whole transaction on
/// fresh state may succeed (`retryable()`), and carries the names and tokens a reader needs.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include <statepact/types.hpp>

namespace statepact {

/// What kind of failure an Error reports; each value has its own Error subclass, except that a
/// server refusal the library does not know is a plain Error with code backend_unavailable.
enum class ErrorCode {
  conflict,                ///< ConflictError (or a PostgreSQL serialization failure)
  deadlock,                ///< DeadlockError
  lock_timeout,            ///< LockTimeoutError
  backend_unavailable,     ///< BackendUnavailableError, or an unknown server refusal
  commit_unknown,          ///< CommitUnknownError
  lease_lost,              ///< LeaseLostError
  lease_not_available,     ///< LeaseNotAvailableError
  invalid_argument,        ///< InvalidArgumentError
  resource_not_found,      ///< ResourceNotFoundError
  idempotency_key_reused,  ///< IdempotencyKeyReusedError
  fence_required,          ///< FenceRequiredError
  configuration,           ///< ConfigurationError
};

/// The enumerator's name (`"lease_lost"`), or `"?"` for a value outside the enumeration.

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

/// Base of every exception the library throws on purpose, except UsageError and Asio's
/// cancellation (`std::system_error` with `asio::error::operation_aborted`). `what()` names the
/// resource, key, owner or agent and tokens involved, and keeps a server's own text.
class Error : public std::runtime_error {
 public:
  /// An error of kind `code` with message `what`; not retryable unless a subclass says so.
  Error(ErrorCode code, const std::string& what) : std::runtime_error(what), code_(code) {}
  /// The kind of failure.
  ErrorCode code() const noexcept { return code_; }
  /// Whether running the whole transaction again on fresh state may succeed; `Manager::run`
  /// retries exactly these errors.
  virtual bool retryable() const noexcept { return false; }

 private:
  ErrorCode code_;
};

/// Validation failed at commit: a key the transaction read changed since (its version moved).
/// Nothing was applied. Retryable: re-run the whole transaction on fresh data.
class ConflictError : public Error {
 public:
  /// A conflict on `key` of `resource`, which was read at version `expected` and is now at
  /// `found`.
  ConflictError(std::string resource, std::string key, Version expected, Version found)
      : Error(ErrorCode::conflict,
              fmt::format("conflict on resource '{}' key '{}': expected version {}, found {}",
                          resource, key, expected, found)),
        resource_(std::move(resource)),
        key_(std::move(key)),
        expected_(expected),
        found_(found) {}
  /// Always true.
  bool retryable() const noexcept override { return true; }
  /// The resource holding the key.
  const std::string& resource() const noexcept { return resource_; }
  /// The key whose version moved.
  const std::string& key() const noexcept { return key_; }
  /// The version the transaction read.
  Version expected_version() const noexcept { return expected_; }
  /// The version found at commit.
  Version found_version() const noexcept { return found_; }

 private:
  std::string resource_, key_;
  Version expected_, found_;
};

/// A pessimistic lock wait would close a wait cycle (or PostgreSQL reported a deadlock).
/// Retryable: re-run the whole transaction.
class DeadlockError : public Error {
 public:
  /// A deadlock described by `what`.
  explicit DeadlockError(const std::string& what) : Error(ErrorCode::deadlock, what) {}
  /// Always true.
  bool retryable() const noexcept override { return true; }
};

/// A pessimistic lock was not granted within the session's lock timeout. Retryable: re-run the
/// whole transaction.
class LockTimeoutError : public Error {
 public:
  /// A lock timeout described by `what`.
  explicit LockTimeoutError(const std::string& what) : Error(ErrorCode::lock_timeout, what) {}
  /// Always true.
  bool retryable() const noexcept override { return true; }
};

/// The server could not be reached, or refused the call in a state that passes (loading, a
/// read-only replica, a failover, too many connections, a cancelled statement...). Nothing was
/// applied, so retrying is safe.
class BackendUnavailableError : public Error {
 public:
  /// An outage described by `what`.
  explicit BackendUnavailableError(const std::string& what)
      : Error(ErrorCode::backend_unavailable, what) {}
  /// Always true.
  bool retryable() const noexcept override { return true; }
};

/// The connection was lost after the commit was sent: it may or may not have been applied. Only a
/// commit with an idempotency key may be re-sent, because a replay then applies nothing twice
/// (`Manager::run` then resends the identical request; see also `Session::resend_commit()`).
class CommitUnknownError : public Error {
 public:
  /// An unknown outcome described by `what`, for a commit that had an idempotency key or not.
  CommitUnknownError(const std::string& what, bool has_idempotency_key)
      : Error(ErrorCode::commit_unknown, what), idempotent_(has_idempotency_key) {}
  /// True exactly when the commit had an idempotency key.
  bool retryable() const noexcept override { return idempotent_; }
  /// Whether the commit carried an idempotency key, so that resending it is safe.
  bool has_idempotency_key() const noexcept { return idempotent_; }

 private:
  bool idempotent_;
};

/// The caller's token is older than the storage's high-water mark, or the lease expired or was
/// superseded. Never retryable: retrying with the same token is wrong; stop, re-acquire, re-read.
/// From a lease operation, `owner()` is the lease's owner; from a commit, storage cannot know who
/// held the stale token, so `owner()` is empty and `agent_id()` names the session's agent.
class LeaseLostError : public Error {
 public:
  /// A lease operation of `owner` on `resource` with `token` failed: the resource's fence is now
  /// `current_fence`, and `reason` says why (expired, superseded, released...).
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

  /// A commit of `agent_id`'s session refused because its fence token `token` for `resource` is
  /// older than the resource's current fence; `owner()` is empty.
  static LeaseLostError fenced_commit(std::string resource, std::string agent_id, Token token,
                                      Token current_fence) {
    // The message first: arguments are evaluated in no fixed order, and two are moved from.
    std::string what = fmt::format(
        "commit by agent '{}' fenced off on resource '{}': its token {} is older "
        "than the current fence {}; stop, re-acquire the lease and re-read",
        agent_id, resource, token, current_fence);
    return LeaseLostError(what, std::move(resource), std::move(agent_id), token, current_fence);
  }

  /// The resource whose lease was lost.
  const std::string& resource() const noexcept { return resource_; }
  /// The lease's owner; empty when the error comes from a commit.
  const std::string& owner() const noexcept { return owner_; }
  /// The agent whose session carried the stale token; empty for lease operations.
  const std::string& agent_id() const noexcept { return agent_id_; }
  /// The caller's stale token.
  Token token() const noexcept { return token_; }
  /// The resource's fence (high-water mark) when the error was raised.
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

/// A write to a resource whose policy requires a fence token, from a session that carried none for
/// it. Nothing was applied. Never retryable: open the session with .fence(lease.token) for that
/// resource.
class FenceRequiredError : public Error {
 public:
  /// `agent_id`'s commit wrote `resource` without a fence token for it.
  FenceRequiredError(std::string resource, std::string agent_id)
      : Error(ErrorCode::fence_required,
              fmt::format("resource '{}' requires a fence token for every write, and the commit "
                          "of agent '{}' carried none for it; hold its lease and open the session "
                          "with .fence(lease.token)",
                          resource, agent_id)),
        resource_(std::move(resource)),
        agent_id_(std::move(agent_id)) {}
  /// The fence-required resource written without a token.
  const std::string& resource() const noexcept { return resource_; }
  /// The agent of the session that committed.
  const std::string& agent_id() const noexcept { return agent_id_; }

 private:
  std::string resource_, agent_id_;
};

/// Another owner holds a live lease. Never retryable: wait or back off; never force.
/// (`LeaseManager::try_acquire` returns an empty optional instead.)
class LeaseNotAvailableError : public Error {
 public:
  /// `requester` asked for `resource`'s lease, held by `holder` with `holder_token` until
  /// `holder_expires_at` (backend clock). The requester appears only in the message.
  LeaseNotAvailableError(std::string resource, std::string requester, std::string holder,
                         Token holder_token, time_point holder_expires_at)
      : Error(ErrorCode::lease_not_available,
              fmt::format("lease on resource '{}' not available to '{}': held by '{}' (token {})",
                          resource, requester, holder, holder_token)),
        resource_(std::move(resource)),
        holder_(std::move(holder)),
        holder_token_(holder_token),
        holder_expires_at_(holder_expires_at) {}
  /// The resource asked for.
  const std::string& resource() const noexcept { return resource_; }
  /// The owner of the live lease.
  const std::string& holder() const noexcept { return holder_; }
  /// The live lease's token.
  Token holder_token() const noexcept { return holder_token_; }
  /// When the live lease expires unless renewed. The backend's clock: compare only with other
  /// backend times.
  time_point holder_expires_at() const noexcept { return holder_expires_at_; }

 private:
  std::string resource_, holder_;
  Token holder_token_;
  time_point holder_expires_at_;
};

/// Bad input (names, values, sizes, durations, options, URLs, a fence token that was never
/// issued), refused before any I/O or before anything was applied. Never retryable.
class InvalidArgumentError : public Error {
 public:
  /// Bad input described by `what`.
  explicit InvalidArgumentError(const std::string& what)
      : Error(ErrorCode::invalid_argument, what) {}
};

/// A session, read, commit or policy call names a resource that is not registered. Never
/// retryable.
class ResourceNotFoundError : public Error {
 public:
  /// `resource` is not registered.
  explicit ResourceNotFoundError(std::string resource)
      : Error(ErrorCode::resource_not_found,
              fmt::format("resource '{}' is not registered", resource)),
        resource_(std::move(resource)) {}
  /// The unregistered resource.
  const std::string& resource() const noexcept { return resource_; }

 private:
  std::string resource_;
};

/// A commit's idempotency key was already used for a commit with a different request. Nothing
/// was applied. Never retryable: use a fresh key for a different commit.
class IdempotencyKeyReusedError : public Error {
 public:
  /// The idempotency key `key` was reused.
  explicit IdempotencyKeyReusedError(const std::string& key)
      : Error(ErrorCode::idempotency_key_reused,
              fmt::format("idempotency key '{}' was already used for a different commit", key)) {}
};

/// The server or its settings refuse this client, or would make it unsafe: authentication,
/// permissions, a missing database or schema, a setting safety depends on (a Redis that may evict
/// keys). Never retryable: the message says what to fix, and nothing was applied.
class ConfigurationError : public Error {
 public:
  /// A configuration problem described by `what`.
  explicit ConfigurationError(const std::string& what) : Error(ErrorCode::configuration, what) {}
};

/// Misuse of the API (a session used after commit or abort, `resend_commit()` when the outcome is
/// known): a bug in the caller, not a state error. Not a statepact::Error, so never retried.
class UsageError : public std::logic_error {
 public:
  /// The constructors of `std::logic_error`.
  using std::logic_error::logic_error;
};

}  // namespace statepact
