/// @file
/// The entry point for transactions: leases that register their resource, sessions, and run(),
/// which re-runs a whole transaction on retryable errors and resolves an unknown commit outcome.
#pragma once

#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include <statepact/backend.hpp>
#include <statepact/detail/unknown_outcome.hpp>
#include <statepact/errors.hpp>
#include <statepact/lease_manager.hpp>
#include <statepact/observer.hpp>
#include <statepact/retry.hpp>
#include <statepact/session.hpp>
#include <statepact/session_options.hpp>

namespace statepact {

namespace detail {
template <class T>
struct awaitable_value;
template <class T>
struct awaitable_value<asio::awaitable<T>> {
  using type = T;
};
}  // namespace detail

/// The entry point for transactions on backend `B`: resources, sessions, and run(), which re-runs
/// a whole transaction on retryable errors and resolves an unknown commit outcome.
///
/// It keeps a pointer to the backend, which it does not own and which must outlive it and every
/// session it made; it holds no other state but its observer, so one manager may be used by many
/// coroutines at once, on as many threads as the backend allows (the memory backend: any).
/// Cancellation (Asio): a request already sent to storage is not interrupted; the cancelled
/// coroutine gets std::system_error(asio::error::operation_aborted) at its next co_await.
template <Backend B>
class Manager {
 public:
  /// Works on `backend` (not owned).
  explicit Manager(B& backend) : backend_(&backend) {}

  /// The backend this manager works on.
  B& backend() const { return *backend_; }

  /// Reports leases taken through lease(), commits and lock waits of its sessions, and run()'s
  /// retries to `o` (null: to nobody, the default; not owned, it must outlive the manager and its
  /// sessions). Set it before use: not synchronized with calls in flight. Sessions made before
  /// keep the observer they were made with.
  void set_observer(Observer* o) { observer_ = o; }
  /// The observer set with set_observer(), or null.
  Observer* observer() const { return observer_; }

  /// Creates the resource with its initial state (a JSON object: key -> value, keys at version 0)
  /// and policy; an existing one is left unchanged, policy included (returns false).
  /// @throws InvalidArgumentError for a bad name or initial state (before any I/O).
  /// @throws BackendUnavailableError (retryable) or another backend error if storage fails.
  asio::awaitable<bool> register_resource(std::string name, Value initial_state = Value::object(),
                                          ResourcePolicy policy = {}) {
    return backend_->register_resource(std::move(name), std::move(initial_state), policy);
  }

  /// Changes what storage enforces on the resource's commits, from the next commit on.
  /// @throws ResourceNotFoundError if the resource is not registered.
  /// @throws InvalidArgumentError for a bad name; backend errors if storage fails.
  asio::awaitable<void> set_resource_policy(std::string name, ResourcePolicy policy) {
    return backend_->set_resource_policy(std::move(name), policy);
  }

  /// Registers the resource with an empty state if needed, so a lease works before any session,
  /// then takes the lease once, as LeaseManager::lease() does (and throws as it throws; its
  /// LeaseNotAvailableError is not retryable). The default ttl here is 30 s.
  asio::awaitable<Lease> lease(std::string resource, std::string owner,
                               milliseconds ttl = std::chrono::seconds(30)) {
    LeaseManager<B> leases = lease_manager();
    co_return co_await leases.lease(std::move(resource), std::move(owner), ttl);
  }
  /// The same, and the resource gets `policy` (also when it existed before).
  asio::awaitable<Lease> lease(std::string resource, std::string owner, milliseconds ttl,
                               ResourcePolicy policy) {
    LeaseManager<B> leases = lease_manager();
    co_return co_await leases.lease(std::move(resource), std::move(owner), ttl, policy);
  }

  /// Opens a session: normalizes `options`, then asks the backend to begin it. Server backends
  /// check that the resources exist with one round trip, skipped for names this client already saw
  /// registered (a pessimistic PostgreSQL session also takes a connection of its own and opens its
  /// transaction). The session reports to the manager's current observer.
  /// @throws InvalidArgumentError for bad options (SessionOptions::normalize()), before any I/O.
  /// @throws ResourceNotFoundError if a resource is not registered.
  /// @throws BackendUnavailableError (retryable) or another backend error if storage fails.
  asio::awaitable<Session<B>> session(SessionOptions options) {
    options.normalize();
    SessionId id;
    if constexpr (InlineBackend<B>)
      id = backend_->begin_session_now(options.resources(), options.isolation());
    else
      id = co_await backend_->begin_session(options.resources(), options.isolation());
    co_return Session<B>(*backend_, std::move(options), id, observer_);
  }

  /// Runs fn(session) in a fresh session and commits unless fn did; on a retryable error waits
  /// (exponential backoff, full jitter) and runs fn again from the start on fresh state. Returns
  /// what fn returns; non-retryable errors and the last error once attempts run out propagate.
  /// `fn` takes `Session<B>&` and returns an asio::awaitable; it may run up to
  /// policy.max_attempts() times, so anything it does outside the session happens again. Every
  /// attempt uses the same options, idempotency key included.
  ///
  /// A commit with an idempotency key whose outcome is unknown (CommitUnknownError) is not
  /// re-run: the identical request is resent with backoff until storage answers (a replay means
  /// the first one was applied), and run() returns fn's value from that attempt. Only a refusal
  /// that proves nothing was applied (Session::resend_commit lists them) lets fn run again; any
  /// other failure of a resend keeps the outcome unknown. Resends stop once the idempotency
  /// record may have expired (half the backend's idempotency_retention() after the first send):
  /// the outcome is then reported unknown, never resolved by running fn again. If fn committed
  /// the session itself and returns a value, that value is gone with the exception, so the
  /// CommitUnknownError propagates and fn is not run again.
  ///
  /// @throws InvalidArgumentError for bad options, before the first attempt; also, with an
  ///         idempotency key, for a policy whose resends could wait longer in total (the sum of
  ///         every backoff ceiling) than half the backend's idempotency retention.
  /// @throws Error (any non-retryable one, e.g. LeaseLostError, FenceRequiredError) at once.
  /// @throws Error (the last retryable one: ConflictError, DeadlockError, LockTimeoutError,
  ///         BackendUnavailableError, ...) once max_attempts attempts failed.
  /// @throws CommitUnknownError without an idempotency key (at once), or when max_attempts resends
  ///         left the outcome unknown.
  /// Anything else fn throws (not a statepact::Error) propagates at once; an uncommitted session
  /// is aborted.
  /// Cancellation throws std::system_error(asio::error::operation_aborted) and is never retried; if
  /// it comes while an unknown outcome is being resolved, that outcome stays unknown.
  template <class F>
  auto run(SessionOptions options, F fn, RetryPolicy policy = RetryPolicy()) -> asio::awaitable<
      typename detail::awaitable_value<std::invoke_result_t<F&, Session<B>&>>::type> {
    using R = typename detail::awaitable_value<std::invoke_result_t<F&, Session<B>&>>::type;
    using Slot = std::conditional_t<std::is_void_v<R>, bool, R>;
    const SessionOptions normalized = options.normalized();  // bad options fail before attempt 1
    if (normalized.idempotency_key()) check_resends_fit(policy);
    for (int attempt = 1;; ++attempt) {
      std::optional<Session<B>> s;
      std::optional<Slot> value;  // fn's result, once fn returned
      bool unknown = false;
      const detail::ObserverTimer timer(observer_);
      ErrorCode reason = ErrorCode::conflict;
      try {
        s.emplace(co_await session(normalized));
        if constexpr (std::is_void_v<R>) {
          co_await fn(*s);
          value = true;
        } else {
          value.emplace(co_await fn(*s));
        }
        if (s->active()) co_await s->commit();
        if constexpr (std::is_void_v<R>)
          co_return;
        else
          co_return std::move(*value);
      } catch (const CommitUnknownError&) {
        if (!s || !s->outcome_unknown() || (!value && !std::is_void_v<R>)) throw;
        unknown = true;
      } catch (const Error& e) {
        if (!e.retryable() || attempt >= policy.max_attempts()) throw;
        reason = e.code();
      }
      if (unknown) {
        // Resolve before anything else: never run fn again while the first commit may stand.
        const bool applied = co_await resolve(*s, policy, attempt, observer_, timer);
        if (applied) {
          if constexpr (std::is_void_v<R>)
            co_return;
          else
            co_return std::move(*value);
        }
        continue;  // storage refused the resend (e.g. a conflict): it was never applied
      }
      // No co_await inside a handler: wait here, then start over.
      const milliseconds backoff = policy.delay(attempt);
      observe_retry(observer_, normalized.agent_id(), attempt, reason, timer, backoff);
      co_await pause(backoff);
    }
  }

 private:
  // lease() is LeaseManager's, reporting to this manager's observer.
  LeaseManager<B> lease_manager() const {
    LeaseManager<B> leases(*backend_);
    leases.set_observer(observer_);
    return leases;
  }

  static void observe_retry(Observer* o, const std::string& agent, int attempt, ErrorCode reason,
                            const detail::ObserverTimer& timer, milliseconds backoff) noexcept {
    if (!o) return;
    detail::notify(o, &Observer::on_retry,
                   RetryEventInfo{agent, attempt, reason, timer.elapsed(), backoff});
  }

  static asio::awaitable<void> pause(milliseconds d) {
    asio::steady_timer timer(co_await asio::this_coro::executor, d);
    co_await timer.async_wait(asio::use_awaitable);
  }

  // A resend schedule that cannot end inside the resend window could only end in an unknown
  // outcome: refuse it before anything is sent.
  void check_resends_fit(const RetryPolicy& policy) const {
    const milliseconds longest = detail::longest_resend_schedule(
        policy.max_attempts(), policy.initial_backoff(), policy.multiplier(), policy.max_backoff());
    const milliseconds window = detail::resend_window(backend_->idempotency_retention());
    if (longest >= window)
      throw InvalidArgumentError(fmt::format(
          "the retry policy may wait {} ms in total between resends of a commit of unknown "
          "outcome, but resends are only safe for {} ms (half the backend's idempotency retention "
          "of {} ms): lower max_attempts or max_backoff, or raise the retention",
          longest.count(), window.count(), backend_->idempotency_retention().count()));
  }

  // Resends the unknown commit of `s` until storage answers. True: applied (now or as a replay).
  // False: storage refused it in a way that proves nothing was applied, with a retryable error
  // (a conflict), so run() may start over. Anything else, or running out of attempts, propagates
  // (the session keeps the outcome unknown unless storage refused it).
  static asio::awaitable<bool> resolve(Session<B>& s, const RetryPolicy& policy, int attempt,
                                       Observer* observer, detail::ObserverTimer timer) {
    ErrorCode reason = ErrorCode::commit_unknown;
    for (int resend = 1;; ++resend) {
      const milliseconds backoff = policy.delay(resend);
      observe_retry(observer, s.agent_id(), resend, reason, timer, backoff);
      co_await pause(backoff);
      timer = detail::ObserverTimer(observer);
      bool refused = false;
      try {
        co_await s.resend_commit();
        co_return true;
      } catch (const CommitUnknownError& e) {
        // Not retryable: the resend window closed, nothing more may be sent.
        if (!e.retryable() || resend >= policy.max_attempts()) throw;
        reason = ErrorCode::commit_unknown;
      } catch (const Error& e) {
        // The session has finished: storage proved neither send was applied.
        if (!e.retryable() || attempt >= policy.max_attempts()) throw;
        refused = true;
        reason = e.code();
      }
      if (refused) {
        const milliseconds rerun = policy.delay(attempt);
        observe_retry(observer, s.agent_id(), attempt, reason, timer, rerun);
        co_await pause(rerun);
        co_return false;
      }
    }
  }

  B* backend_;
  Observer* observer_ = nullptr;  // not owned; may be null
};

}  // namespace statepact
