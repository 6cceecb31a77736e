/// @file
/// Hooks for metrics and tracing: what the library did, with how long it took. A Manager or
/// LeaseManager given an Observer reports every lease operation, commit, retry and pessimistic lock
/// wait to it; without one (the default) the only cost is a null-pointer check: no clock is read.
#pragma once

#include <chrono>
#include <cstddef>
#include <exception>
#include <string_view>

#include <statepact/commit_request.hpp>
#include <statepact/errors.hpp>
#include <statepact/types.hpp>

namespace statepact {

/// What happened to a lease.
enum class LeaseEvent {
  acquired,        ///< A lease was granted (after any waiting).
  not_available,   ///< Another owner held it (after waiting, if the caller waited).
  renewed,         ///< A renewal succeeded.
  renewal_failed,  ///< A renewal failed for a passing reason; it is retried while the lease lasts.
  lost,            ///< The lease is gone: storage said so, or renewals kept failing until expiry.
  released,        ///< Its owner ended a live lease.
  revoked,         ///< LeaseManager::revoke() ended a lease against its owner's will.
};

/// How a commit (or the resend of one whose outcome was unknown) ended.
enum class CommitOutcome {
  applied,     ///< Storage applied it.
  replayed,    ///< An idempotent replay: an earlier identical commit had been applied.
  conflict,    ///< Validation failed (ConflictError).
  fenced_off,  ///< Refused by fencing: a stale token (LeaseLostError) or none (FenceRequiredError).
  unknown,     ///< The connection was lost after sending (CommitUnknownError).
  failed,      ///< Any other error (unreachable backend, bad input, ...).
};

/// How a pessimistic lock request ended.
enum class LockOutcome {
  acquired,  ///< The lock was granted.
  timeout,   ///< Not granted within the session's lock_timeout (LockTimeoutError).
  deadlock,  ///< Refused to break a wait cycle (DeadlockError).
  failed     ///< Any other error, cancellation included.
};

/// The event's name, as written in the enum ("acquired", "not_available", ...).
inline const char* to_string(LeaseEvent e) {
  switch (e) {
    case LeaseEvent::acquired:
      return "acquired";
    case LeaseEvent::not_available:
      return "not_available";
    case LeaseEvent::renewed:
      return "renewed";
    case LeaseEvent::renewal_failed:
      return "renewal_failed";
    case LeaseEvent::lost:
      return "lost";
    case LeaseEvent::released:
      return "released";
    case LeaseEvent::revoked:
      return "revoked";
  }
  return "?";
}

/// The outcome's name, as written in the enum ("applied", "replayed", ...).
inline const char* to_string(CommitOutcome o) {
  switch (o) {
    case CommitOutcome::applied:
      return "applied";
    case CommitOutcome::replayed:
      return "replayed";
    case CommitOutcome::conflict:
      return "conflict";
    case CommitOutcome::fenced_off:
      return "fenced_off";
    case CommitOutcome::unknown:
      return "unknown";
    case CommitOutcome::failed:
      return "failed";
  }
  return "?";
}

/// The outcome's name, as written in the enum ("acquired", "timeout", ...).
inline const char* to_string(LockOutcome o) {
  switch (o) {
    case LockOutcome::acquired:
      return "acquired";
    case LockOutcome::timeout:
      return "timeout";
    case LockOutcome::deadlock:
      return "deadlock";
    case LockOutcome::failed:
      return "failed";
  }
  return "?";
}

/// "shared" or "exclusive".
inline const char* to_string(LockMode m) {
  return m == LockMode::shared ? "shared" : "exclusive";
}

/// Durations are measured on std::chrono::steady_clock by the client, from the start of the
/// operation to its end (including any waiting the caller asked for).
using steady_duration = std::chrono::steady_clock::duration;

/// A lease operation of a LeaseManager (hold()'s renewals included) or Manager::lease().
/// The string_views in this and the other event structs are valid only during the call: copy
/// what must outlive it.
struct LeaseEventInfo {
  LeaseEvent event;            ///< What happened.
  std::string_view resource;   ///< The lease's resource.
  std::string_view owner;      ///< The lease's owner (or would-be owner).
  Token token = 0;             ///< The lease's token; 0 when none was granted (not_available).
  steady_duration duration{};  ///< How long the operation took.
};

/// A commit, or a resend of one whose outcome was unknown.
struct CommitEventInfo {
  CommitOutcome outcome;       ///< How it ended.
  std::string_view agent_id;   ///< The session's agent.
  std::size_t resources = 0;   ///< How many resources the commit covered.
  std::size_t writes = 0;      ///< How many keys it wrote or erased.
  bool resend = false;         ///< True for Session::resend_commit().
  steady_duration duration{};  ///< How long the commit took.
};

/// Manager::run is about to run the transaction again (or resend a commit of unknown outcome).
struct RetryEventInfo {
  std::string_view agent_id;   ///< The transaction's agent.
  int attempt = 0;             ///< The attempt that failed, from 1.
  ErrorCode reason;            ///< Why it failed.
  steady_duration duration{};  ///< How long the failed attempt took.
  milliseconds backoff{0};     ///< The wait before the next attempt.
};

/// A pessimistic lock asked of storage (a lock the session already held is not asked again).
struct LockWaitInfo {
  std::string_view resource;   ///< The key's resource.
  std::string_view key;        ///< The locked key.
  LockMode mode;               ///< Shared or exclusive.
  LockOutcome outcome;         ///< How the request ended.
  steady_duration duration{};  ///< How long it took, waiting included.
};

/// Hooks for metrics and tracing, given to Manager::set_observer() or
/// LeaseManager::set_observer(). Implement the events you need; the others do nothing.
///
/// Thread-safety: the library calls an observer from whichever thread runs the operation, so with
/// an io_context run on several threads (or several io_contexts sharing one observer) the calls are
/// concurrent: an observer must be safe to call from several threads at once.
///
/// Errors: an exception thrown by an observer is caught and dropped; the library's operation goes
/// on as if the observer had returned. Calls are synchronous on the operation's path, so keep them
/// short (count, record, enqueue) and never block.
///
/// Lifetime: a Manager, LeaseManager or Session holds a plain pointer; the observer must outlive
/// them.
class Observer {
 public:
  virtual ~Observer() = default;
  /// A lease was acquired, refused, renewed, lost or released.
  virtual void on_lease(const LeaseEventInfo&) {}
  /// A session's commit or resend ended.
  virtual void on_commit(const CommitEventInfo&) {}
  /// Manager::run is about to wait and try again.
  virtual void on_retry(const RetryEventInfo&) {}
  /// A pessimistic lock request to storage ended.
  virtual void on_lock_wait(const LockWaitInfo&) {}
};

namespace detail {

// Reads the clock only when someone listens.
class ObserverTimer {
 public:
  explicit ObserverTimer(const Observer* o)
      : start_(o ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{}) {}
  steady_duration elapsed() const { return std::chrono::steady_clock::now() - start_; }

 private:
  std::chrono::steady_clock::time_point start_;
};

// An observer's failure must never become the library's: every call goes through these.
template <class Info>
void notify(Observer* o, void (Observer::*hook)(const Info&), const Info& info) noexcept {
  try {
    (o->*hook)(info);
  } catch (...) {
  }
}

inline void notify_lease(Observer* o, LeaseEvent event, std::string_view resource,
                         std::string_view owner, Token token, const ObserverTimer& timer) noexcept {
  if (!o) return;
  notify(o, &Observer::on_lease, LeaseEventInfo{event, resource, owner, token, timer.elapsed()});
}

// Which outcome a failed commit had, from the exception it threw.
inline CommitOutcome commit_outcome(const std::exception_ptr& e) noexcept {
  try {
    std::rethrow_exception(e);
  } catch (const ConflictError&) {
    return CommitOutcome::conflict;
  } catch (const LeaseLostError&) {
    return CommitOutcome::fenced_off;
  } catch (const FenceRequiredError&) {
    return CommitOutcome::fenced_off;
  } catch (const CommitUnknownError&) {
    return CommitOutcome::unknown;
  } catch (...) {
    return CommitOutcome::failed;
  }
}

inline LockOutcome lock_outcome(const std::exception_ptr& e) noexcept {
  try {
    std::rethrow_exception(e);
  } catch (const LockTimeoutError&) {
    return LockOutcome::timeout;
  } catch (const DeadlockError&) {
    return LockOutcome::deadlock;
  } catch (...) {
    return LockOutcome::failed;
  }
}

}  // namespace detail
}  // namespace statepact
