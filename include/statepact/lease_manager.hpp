/// @file
/// The lease entry point: take, renew and release leases, ask for the fence, and hold a lease for
/// the length of a job (acquire, optionally waiting; renew in the background; release on every
/// exit path; never lose ownership silently).
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/experimental/parallel_group.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include <statepact/backend.hpp>
#include <statepact/detail/backoff.hpp>
#include <statepact/detail/hold_deadline.hpp>
#include <statepact/detail/hold_keeper.hpp>
#include <statepact/detail/hold_state.hpp>
#include <statepact/detail/lease_registration.hpp>
#include <statepact/detail/validate.hpp>
#include <statepact/errors.hpp>
#include <statepact/inspect.hpp>
#include <statepact/observer.hpp>
#include <statepact/types.hpp>

namespace statepact {

/// How LeaseManager::hold() takes and keeps its lease: ttl, background renewal, waiting for a busy
/// lease, what a loss does to the body, and the resource's policy. A plain value with chainable
/// setters; the setters check nothing, hold() validates the combination when called.
class HoldOptions {
 public:
  /// Defaults: the manager's default ttl, no renewal, no waiting, cancel the body on loss, the
  /// resource's policy left as it is.
  HoldOptions() = default;
  /// The lease's ttl (1 ms to 7 days); unset: the LeaseManager's default ttl.
  HoldOptions& ttl(milliseconds d) {
    ttl_ = d;
    return *this;
  }
  /// Renews the lease in the background while the body runs (default: off, so the lease is lost,
  /// and the body told, at its local deadline: see LeaseManager::hold()).
  HoldOptions& auto_renew(bool on) {
    auto_renew_ = on;
    return *this;
  }
  /// The renewal interval with auto_renew, measured on the local steady clock from the send of the
  /// last successful renewal; it must be positive and shorter than the ttl less hold()'s margin
  /// (2 % of the ttl + 10 ms). Default: a third of the ttl, so two renewals can fail or come late
  /// before the local deadline.
  HoldOptions& renew_every(milliseconds d) {
    renew_every_ = d;
    return *this;
  }
  /// How long to wait for a lease another owner holds (0 to 7 days, local steady clock); zero
  /// fails at once with LeaseNotAvailableError.
  HoldOptions& wait(milliseconds d) {
    wait_ = d;
    return *this;
  }
  /// On a loss (a renewal refused, or the local deadline passed), cancel the body through Asio
  /// cancellation (default), or only mark the handle lost (HeldLease::lost()) and let the body
  /// notice.
  HoldOptions& cancel_on_loss(bool on) {
    cancel_on_loss_ = on;
    return *this;
  }
  /// hold() registers the resource (empty state) if needed; with a policy it also sets that policy,
  /// e.g. ResourcePolicy{.fence_required = true} so no write without the lease's token lands.
  HoldOptions& policy(ResourcePolicy p) {
    policy_ = p;
    return *this;
  }

  /// The ttl set, if any.
  const std::optional<milliseconds>& ttl() const { return ttl_; }
  /// Whether the lease is renewed in the background.
  bool auto_renew() const { return auto_renew_; }
  /// The renewal interval set, if any.
  const std::optional<milliseconds>& renew_every() const { return renew_every_; }
  /// How long to wait for a busy lease.
  milliseconds wait() const { return wait_; }
  /// Whether a lost renewal cancels the body.
  bool cancel_on_loss() const { return cancel_on_loss_; }
  /// The policy to give the resource, if any.
  const std::optional<ResourcePolicy>& policy() const { return policy_; }

 private:
  std::optional<milliseconds> ttl_;
  bool auto_renew_ = false;
  std::optional<milliseconds> renew_every_;
  milliseconds wait_{0};
  bool cancel_on_loss_ = true;
  std::optional<ResourcePolicy> policy_;
};

/// What the body of hold() may take instead of `const Lease&`: the live view of the held lease.
/// hold() makes it and it is valid for the body's run. Its calls are thread-safe (a mutex guards
/// the state it shares with the renewal loop, which may run on another thread).
class HeldLease {
 public:
  /// Made by LeaseManager::hold(); not meant to be constructed by callers.
  explicit HeldLease(std::shared_ptr<detail::HoldState> state) : state_(std::move(state)) {}
  /// The lease as last renewed (expires_at by the backend's clock); the token never changes.
  Lease lease() const { return state_->lease(); }
  /// The lease's fencing token: give it to the sessions that write under this lease.
  Token token() const { return state_->lease().token; }
  /// True once the lease is lost (a renewal found it gone, or its local deadline passed with no
  /// renewal answered in time: see LeaseManager::hold()): stop working, do not commit under this
  /// token. It turns true before storage can let another owner in.
  bool lost() const { return state_->failure() != nullptr; }
  /// Throws the loss (LeaseLostError; when renewals were failing at the deadline, with the last
  /// failure nested: std::rethrow_if_nested) if there was one; otherwise does nothing.
  /// @throws LeaseLostError if lost() is true (not retryable: stop, re-acquire, re-read).
  void check() const {
    if (auto e = state_->failure()) std::rethrow_exception(e);
  }

 private:
  std::shared_ptr<detail::HoldState> state_;
};

/// The entry point for lease work on backend `B`: take, renew and release leases, read the fence,
/// and hold a lease for the length of a job (hold()).
///
/// It keeps a pointer to the backend, which it does not own and which must outlive it, and holds no
/// other state but its default ttl and observer, so it is cheap to copy and one manager may be used
/// by many coroutines at once, on as many threads as the backend allows (the memory backend: any).
/// Every call is one or a few backend round trips; none retries on its own, except acquire() and
/// hold() waiting for a busy lease, and hold()'s renewals.
///
/// Times: ttls and `expires_at` are decided by the backend's clock; the waits, renewal intervals
/// and hold()'s local deadline this class schedules itself are measured on the local
/// std::chrono::steady_clock.
///
/// Cancellation (Asio): a request already sent to storage is not interrupted; it completes, and the
/// cancelled coroutine gets std::system_error(asio::error::operation_aborted) at its next co_await,
/// before anything more is sent. So a lease whose acquisition completed server-side but whose
/// Lease never reached the caller stays held until its ttl runs out (its token counts as issued).
template <Backend B>
class LeaseManager {
  // Helpers first: hold()'s return type names them.
  template <class Body>
  static auto call(Body& body, HeldLease& handle, const Lease& lease) {
    if constexpr (std::is_invocable_v<Body&, HeldLease&>)
      return body(handle);
    else
      return body(lease);
  }

  template <class Body>
  struct body_result {
    using awaitable_t = decltype(call(std::declval<Body&>(), std::declval<HeldLease&>(),
                                      std::declval<const Lease&>()));
    using type = typename awaitable_t::value_type;
  };

  // co_spawn needs a default-constructible result; this wraps any R (and void).
  template <class R>
  struct value_box {
    std::optional<R> value;
  };
  struct void_holder {
    std::optional<int> value;
  };
  template <class R>
  using holder_t = std::conditional_t<std::is_void_v<R>, void_holder, value_box<R>>;

 public:
  /// Works on `backend` (not owned; it must outlive the manager), with `default_ttl` for every
  /// call that is given no ttl.
  /// @throws InvalidArgumentError if default_ttl is not between 1 ms and 7 days.
  explicit LeaseManager(B& backend, milliseconds default_ttl = std::chrono::seconds(30))
      : backend_(&backend), default_ttl_(default_ttl) {
    detail::validate_ttl(default_ttl);
  }

  /// The backend this manager works on.
  B& backend() const { return *backend_; }
  /// The ttl used when a call is given none.
  milliseconds default_ttl() const { return default_ttl_; }

  /// Reports acquisitions, renewals (hold()'s too), losses and releases to `o` (null: to nobody,
  /// the default; not owned, it must outlive the manager). Set it before use: not synchronized
  /// with calls in flight.
  void set_observer(Observer* o) { observer_ = o; }
  /// The observer set with set_observer(), or null.
  Observer* observer() const { return observer_; }

  // The calls below are coroutines rather than forwarding the backend's awaitable, so their
  // arguments live in this frame whatever parameter types a backend chose.

  /// Takes the lease of `resource` for `owner` in one attempt (ttl: the default ttl if none is
  /// given; `expires_at` = the backend's now + ttl). A free, released or expired lease gets a new
  /// token (the highest issued + 1); a live lease this owner already holds is extended and keeps
  /// its token. Every call here that takes a lease first registers the resource with an empty state
  /// if it does not exist, so a fenced session on it works.
  /// @throws InvalidArgumentError for a bad name or ttl (1 ms to 7 days), before any I/O.
  /// @throws LeaseNotAvailableError while another owner holds a live lease (not retryable: wait,
  ///         back off, or use acquire() / try_acquire()).
  /// @throws BackendUnavailableError (retryable) or another backend error if storage fails.
  asio::awaitable<Lease> lease(std::string resource, std::string owner,
                               std::optional<milliseconds> ttl = std::nullopt) {
    const milliseconds t = ttl.value_or(default_ttl_);
    co_await detail::register_for_lease(*backend_, resource, owner, t, std::nullopt);
    co_return co_await acquire_once(std::move(resource), std::move(owner), t);
  }
  /// The same, and the resource gets `policy` (also when it existed before; the policy is set
  /// even if the lease then turns out to be unavailable).
  asio::awaitable<Lease> lease(std::string resource, std::string owner, milliseconds ttl,
                               ResourcePolicy policy) {
    co_await detail::register_for_lease(*backend_, resource, owner, ttl, policy);
    co_return co_await acquire_once(std::move(resource), std::move(owner), ttl);
  }

  /// lease(), but empty instead of LeaseNotAvailableError while another owner holds a live lease.
  /// Every other error (bad input, storage unavailable, ...) is thrown as lease() throws it.
  asio::awaitable<std::optional<Lease>> try_acquire(
      std::string resource, std::string owner, std::optional<milliseconds> ttl = std::nullopt) {
    const milliseconds t = ttl.value_or(default_ttl_);
    co_await detail::register_for_lease(*backend_, resource, owner, t, std::nullopt);
    try {
      co_return co_await acquire_once(std::move(resource), std::move(owner), t);
    } catch (const LeaseNotAvailableError&) {
    }
    co_return std::nullopt;
  }

  /// lease(), waiting up to `wait` (local steady clock) for a live lease of another owner to go,
  /// retrying with jittered exponential backoff (5 ms doubling to 500 ms); at the deadline the last
  /// LeaseNotAvailableError propagates. A zero wait makes one attempt, like lease(). The observer
  /// hears one event (acquired or not_available) whose duration includes the waiting.
  /// @throws InvalidArgumentError if `wait` is negative or longer than 7 days (the longest lease),
  ///         or as lease().
  /// @throws LeaseNotAvailableError if the lease is still held by another owner at the deadline.
  /// Other errors from storage propagate at once, without waiting. Cancelled while it waits
  /// between attempts, it throws std::system_error(asio::error::operation_aborted) holding nothing.
  asio::awaitable<Lease> acquire(std::string resource, std::string owner,
                                 std::optional<milliseconds> ttl = std::nullopt,
                                 milliseconds wait = milliseconds::zero()) {
    const milliseconds t = ttl.value_or(default_ttl_);
    detail::validate_wait(wait);
    co_await detail::register_for_lease(*backend_, resource, owner, t, std::nullopt);
    co_return co_await acquire_registered(std::move(resource), std::move(owner), t, wait);
  }

  /// Extends a live lease this owner holds, keeping its token: the returned Lease expires at the
  /// backend's now + ttl (ttl: the lease's own if none is given). Renewing again with the same
  /// Lease is harmless while it is live.
  /// @throws LeaseLostError once it expired (even if nobody took it over), was released, revoked
  ///         or was taken over (not retryable: stop, and acquire again for a new token).
  /// @throws InvalidArgumentError for a malformed lease (token 0, bad names) or ttl.
  /// @throws BackendUnavailableError (retryable) or another backend error if storage fails.
  asio::awaitable<Lease> renew(Lease lease, std::optional<milliseconds> ttl = std::nullopt) {
    if (!observer_) co_return co_await backend_->renew_lease(std::move(lease), ttl);
    const detail::ObserverTimer took(observer_);
    Lease renewed;
    try {
      renewed = co_await backend_->renew_lease(lease, ttl);
    } catch (const LeaseLostError&) {
      detail::notify_lease(observer_, LeaseEvent::lost, lease.resource, lease.owner, lease.token,
                           took);
      throw;
    }
    detail::notify_lease(observer_, LeaseEvent::renewed, renewed.resource, renewed.owner,
                         renewed.token, took);
    co_return renewed;
  }

  /// Ends the lease: true if it was the current lease, false otherwise (never throws for "not the
  /// owner"; releasing twice answers false). The token stays the resource's high-water mark, so a
  /// later lease gets a higher one.
  /// @throws InvalidArgumentError for a malformed lease; backend errors (BackendUnavailableError,
  ///         retryable) if storage fails. An unreleased lease simply expires after its ttl.
  asio::awaitable<bool> release(Lease lease) {
    const detail::ObserverTimer took(observer_);
    const bool released = co_await backend_->release_lease(lease);
    if (released)
      detail::notify_lease(observer_, LeaseEvent::released, lease.resource, lease.owner,
                           lease.token, took);
    co_return released;
  }

  /// The highest token ever issued for the resource (its fence, raised past the token by a revoke),
  /// 0 if none. Needs no registration.
  /// @throws InvalidArgumentError for a bad name; backend errors if storage fails.
  asio::awaitable<Token> current_fence(std::string resource) {
    co_return co_await backend_->current_fence(std::move(resource));
  }

  /// Who holds the resource's lease now: owner, token and time left by the backend's clock; empty
  /// when no live lease exists. Only for a backend that models InspectableBackend.
  /// @throws InvalidArgumentError for a bad name; backend errors if storage fails.
  asio::awaitable<std::optional<LeaseInfo>> holder(std::string resource) requires
      InspectableBackend<B> {
    co_return co_await backend_->lease_holder(std::move(resource));
  }

  /// Ends the resource's current lease against its owner's will and raises the fence in the same
  /// atomic step, so the old holder is fenced off at once: its renewals and fenced commits fail
  /// with LeaseLostError, and the next lease gets a token above the new fence. An operator's call
  /// (statepactctl revoke). Empty when there was nothing to revoke (no lease, or it was released).
  /// Reported to the observer as LeaseEvent::revoked. Only for a backend that models
  /// InspectableBackend. Cancellation mid-call: the revoke may still have happened.
  /// @throws InvalidArgumentError for a bad name; backend errors if storage fails. Retrying is
  ///         safe: if the first call was applied, the retry answers empty.
  asio::awaitable<std::optional<RevokedLease>> revoke(std::string resource) requires
      InspectableBackend<B> {
    const detail::ObserverTimer took(observer_);
    std::optional<RevokedLease> revoked = co_await backend_->revoke_lease(std::move(resource));
    if (revoked)
      detail::notify_lease(observer_, LeaseEvent::revoked, revoked->lease.resource,
                           revoked->lease.owner, revoked->lease.token, took);
    co_return revoked;
  }

  /// Asks storage (one read of the fence) whether a newer token than the lease's exists. It does
  /// not look at expiry: an expired lease nobody took over passes, as its fenced commits would.
  /// @throws LeaseLostError if a newer token exists (taken over or revoked; not retryable).
  /// @throws InvalidArgumentError for a malformed lease or a token that was never issued (above
  ///         the resource's fence).
  /// @throws BackendUnavailableError (retryable) or another backend error if storage fails.
  asio::awaitable<void> guard(Lease lease) {
    detail::validate_lease(lease);
    const detail::ObserverTimer took(observer_);
    const Token fence = co_await backend_->current_fence(lease.resource);
    if (fence > lease.token) {
      detail::notify_lease(observer_, LeaseEvent::lost, lease.resource, lease.owner, lease.token,
                           took);
      throw LeaseLostError(lease.resource, lease.owner, lease.token, fence,
                           "a newer lease token exists");
    }
    if (fence < lease.token)
      throw InvalidArgumentError(fmt::format("lease token {} for resource '{}' was never issued",
                                             lease.token, lease.resource));
  }

  /// Runs body while holding the lease, and tells the body the lease is lost before storage can
  /// let another owner in. body(const Lease&) or body(HeldLease&) returns an asio::awaitable; hold
  /// returns what it returns. The lease is released on every exit; a loss is rethrown from here
  /// (after the body stopped) and never swallowed.
  ///
  /// Steps: validate the options; register the resource (empty state) if needed, setting
  /// `options.policy()` if given; acquire, waiting up to `options.wait()` as acquire() does; run
  /// the body, beside a watch of the local deadline and, with `options.auto_renew()`, a renewal
  /// loop, all on the caller's executor.
  ///
  /// The local deadline, on std::chrono::steady_clock: the moment the acquisition (or the last
  /// renewal answered with success) was *sent*, plus the lease's ttl, less a margin of 2 % of the
  /// ttl plus 10 ms. Storage applied that call no earlier than it was sent, so its expiry comes
  /// later however late the reply came; the 2 % covers the rates of storage's clock and the local
  /// clock (a disciplined clock is off by far less than 0.1 %), the 10 ms a late timer and the loss
  /// reaching the body. The watch is a coroutine of its own: a renewal still in flight (a call may
  /// take its whole call timeout) does not hold it back, and a reply that comes after the deadline
  /// does not undo the loss. A forward step of storage's clock shortens the lease unseen: that is
  /// not covered. Without auto_renew the deadline applies as well, so the body must end within the
  /// ttl less the margin.
  ///
  /// Renewal: every `renew_every` (default ttl / 3), counted from the send of the last successful
  /// renewal. A renewal answered with LeaseLostError loses the lease at once; any other failure is
  /// retried every quarter of the interval until the deadline, which is then a loss with the last
  /// failure nested. On a loss the body is cancelled (Asio cancellation: its next co_await throws
  /// std::system_error(asio::error::operation_aborted)), or with `cancel_on_loss(false)` only
  /// HeldLease::lost() turns true. If the acquisition is answered after the deadline, the body
  /// never runs. When the body has ended the lease is released (a failing release is ignored: the
  /// lease then expires) and hold() returns the body's value or rethrows, in this order of
  /// precedence: the loss, the body's exception.
  ///
  /// @throws InvalidArgumentError for a bad name, ttl (1 ms to 7 days, and above the margin, so
  ///         more than 10 ms), wait (0 to 7 days) or, with auto_renew, a renew_every (given or the
  ///         default) not positive or not shorter than the ttl less the margin; before any I/O.
  /// @throws LeaseNotAvailableError if another owner still holds the lease after the wait; the
  ///         body never runs.
  /// @throws LeaseLostError if the lease was lost while the body ran or before it started (not
  ///         retryable); when renewals were failing at the deadline, the last failure is nested
  ///         (std::rethrow_if_nested).
  /// Whatever the body throws is rethrown after the release. Cancelling the caller while the body
  /// runs cancels the body; the lease is released and what the body threw (normally
  /// std::system_error(asio::error::operation_aborted)) is rethrown. A cancellation that lands
  /// while hold() is still acquiring throws operation_aborted before the body starts; a lease
  /// acquired by then is released first.
  template <class Body>
  auto hold(std::string resource, std::string owner, Body body, HoldOptions options = HoldOptions())
      -> asio::awaitable<typename body_result<Body>::type> {
    using R = typename body_result<Body>::type;
    const milliseconds ttl = options.ttl().value_or(default_ttl_);
    detail::validate_ttl(ttl);
    std::optional<milliseconds> every;
    if (options.auto_renew())
      every = options.renew_every().value_or(detail::default_renew_every(ttl));
    detail::validate_hold_timing(ttl, every);

    detail::validate_wait(options.wait());
    co_await detail::register_for_lease(*backend_, resource, owner, ttl, options.policy());
    detail::steady_time sent;
    const Lease initial = co_await acquire_registered(resource, owner, ttl, options.wait(), &sent);
    auto state = std::make_shared<detail::HoldState>(
        initial, detail::HoldDeadline(sent, initial.ttl, every));
    std::optional<HeldLease> handle(std::in_place, state);
    std::exception_ptr body_error;
    std::optional<holder_t<R>> result;

    if (state->answered_late(std::chrono::steady_clock::now())) {
      // Storage may let another owner in at any moment now: the body must not start.
      const detail::ObserverTimer took(observer_);
      detail::notify_held(observer_, LeaseEvent::lost, initial, took);
    } else {
      auto ex = co_await asio::this_coro::executor;
      // The first to finish cancels the others: the body's end stops renewal and the deadline
      // watch, and a loss (when cancel_on_loss) cancels the body. A cancellation already pending
      // throws here before any starts; the lease must still be released below.
      try {
        auto outcome =
            co_await asio::experimental::make_parallel_group(
                asio::co_spawn(ex, run_body(body, *handle, initial), asio::experimental::deferred),
                asio::co_spawn(
                    ex, detail::renew_held(backend_, state, options.cancel_on_loss(), observer_),
                    asio::experimental::deferred),
                asio::co_spawn(ex,
                               detail::watch_deadline(state, options.cancel_on_loss(), observer_),
                               asio::experimental::deferred))
                .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
        body_error = std::get<1>(outcome);
        if (!body_error) result = std::move(std::get<2>(outcome));
      } catch (...) {
        body_error = std::current_exception();
      }
    }

    // Release even when cancelled: cleanup must not be refused by a pending cancellation.
    co_await asio::this_coro::reset_cancellation_state();
    try {
      const Lease held = state->lease();
      const detail::ObserverTimer took(observer_);
      const bool ended = co_await backend_->release_lease(held);
      if (ended)
        detail::notify_lease(observer_, LeaseEvent::released, held.resource, held.owner, held.token,
                             took);
    } catch (const Error&) {
      // The lease then simply expires; its token stays the high-water mark either way.
    }
    std::exception_ptr thrown = state->failure();
    if (!thrown) thrown = body_error;
    // g++ 12 may destroy a coroutine's locals a second time when an exception leaves it (seen:
    // the state freed early, then read, in hold_cancel_test): drop the shared state first, so a
    // second destruction finds nothing to release.
    handle.reset();
    state.reset();
    if (thrown) std::rethrow_exception(thrown);
    if constexpr (!std::is_void_v<R>) co_return std::move(*result->value);
  }

 private:
  // One attempt, reported to the observer.
  asio::awaitable<Lease> acquire_once(std::string resource, std::string owner, milliseconds ttl) {
    if (!observer_)
      co_return co_await backend_->acquire_lease(std::move(resource), std::move(owner), ttl);
    const detail::ObserverTimer took(observer_);
    Lease lease;
    try {
      lease = co_await backend_->acquire_lease(resource, owner, ttl);
    } catch (const LeaseNotAvailableError&) {
      detail::notify_lease(observer_, LeaseEvent::not_available, resource, owner, 0, took);
      throw;
    }
    detail::notify_lease(observer_, LeaseEvent::acquired, resource, owner, lease.token, took);
    co_return lease;
  }

  // `sent`, if given, gets when the successful attempt was sent.
  asio::awaitable<Lease> acquire_registered(std::string resource, std::string owner,
                                            milliseconds ttl, milliseconds wait,
                                            detail::steady_time* sent = nullptr) {
    const auto deadline = std::chrono::steady_clock::now() + wait;
    const detail::ObserverTimer took(observer_);
    asio::steady_timer timer(co_await asio::this_coro::executor);
    for (int attempt = 1;; ++attempt) {
      try {
        const auto attempt_sent = std::chrono::steady_clock::now();
        Lease lease = co_await backend_->acquire_lease(resource, owner, ttl);
        if (sent) *sent = attempt_sent;
        detail::notify_lease(observer_, LeaseEvent::acquired, resource, owner, lease.token, took);
        co_return lease;
      } catch (const LeaseNotAvailableError&) {
        if (std::chrono::steady_clock::now() >= deadline) {
          detail::notify_lease(observer_, LeaseEvent::not_available, resource, owner, 0, took);
          throw;
        }
      }
      const auto pause = detail::full_jitter(
          detail::backoff_ceiling(attempt, milliseconds(5), 2.0, milliseconds(500)),
          detail::random_unit());
      timer.expires_after(std::min<std::chrono::steady_clock::duration>(
          pause, deadline - std::chrono::steady_clock::now()));
      co_await timer.async_wait(asio::use_awaitable);
    }
  }

  template <class Body>
  static asio::awaitable<holder_t<typename body_result<Body>::type>> run_body(Body& body,
                                                                              HeldLease handle,
                                                                              Lease lease) {
    using R = typename body_result<Body>::type;
    holder_t<R> out;
    if constexpr (std::is_void_v<R>) {
      co_await call(body, handle, lease);
      out.value = 0;
    } else {
      out.value.emplace(co_await call(body, handle, lease));
    }
    co_return out;
  }

  B* backend_;
  milliseconds default_ttl_;
  Observer* observer_ = nullptr;  // not owned; may be null
};

}  // namespace statepact
