/// @file
/// The in-process backend: header-only, thread-safe, with an injectable clock so tests drive lease
/// expiry without sleeping. Every operation completes under one mutex, so each is atomic; only a
/// pessimistic lock wait suspends.
#pragma once

#include <algorithm>
#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/concurrent_channel.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include <statepact/backend.hpp>
#include <statepact/commit_request.hpp>
#include <statepact/detail/commit_verdict.hpp>
#include <statepact/detail/lease_rules.hpp>
#include <statepact/detail/lock_errors.hpp>
#include <statepact/detail/lock_table.hpp>
#include <statepact/detail/validate.hpp>
#include <statepact/errors.hpp>
#include <statepact/inspect.hpp>
#include <statepact/types.hpp>

namespace statepact {

/// Settings of a MemoryBackend: its clock and idempotency retention. Setters return `*this` for
/// chaining. A plain value type, copied into the backend.
class MemoryOptions {
 public:
  /// The defaults: the system clock, 24 h idempotency retention.
  MemoryOptions() = default;
  /// The backend's clock: the only clock that decides lease expiry and idempotency retention
  /// (empty: `Clock::now()`). Called under the backend's mutex, from whichever thread makes the
  /// call, so it must be thread-safe and must not call the backend. testing::ManualClock::source()
  /// gives one that tests move by hand.
  MemoryOptions& clock(std::function<time_point()> now) {
    clock_ = std::move(now);
    return *this;
  }
  /// How long an idempotency record is kept, by the backend's clock: 1 ms .. 365 days
  /// (`InvalidArgumentError` otherwise).
  MemoryOptions& idempotency_retention(milliseconds d) {
    detail::validate_duration("idempotency retention", d, detail::max_idempotency_retention);
    retention_ = d;
    return *this;
  }

  /// The clock set, or empty for the system clock.
  const std::function<time_point()>& clock() const { return clock_; }
  /// How long an idempotency record is kept.
  milliseconds idempotency_retention() const { return retention_; }

 private:
  std::function<time_point()> clock_;
  milliseconds retention_ = std::chrono::hours(24);
};

/// A Backend (also InlineBackend and InspectableBackend) that keeps everything in the process:
/// the embedded default and the reference the server backends mirror. Nothing survives the
/// object, tokens included. One mutex guards everything, so every operation is atomic and the
/// backend may be shared by coroutines on any number of threads. Not copyable or movable; it must
/// outlive every Session, Manager, LeaseManager and lock wait using it.
///
/// Input is checked first (`InvalidArgumentError`, nothing changes). Every coroutine except a
/// lock() that waits runs to its end without suspending, so a cancellation cannot interrupt it
/// (Asio raises `operation_aborted` at the coroutine's next `co_await`); a call that failed
/// changed nothing. Times are the backend's clock (MemoryOptions::clock).
class MemoryBackend {
 public:
  /// An empty backend with `options`.
  explicit MemoryBackend(MemoryOptions options = MemoryOptions()) : options_(std::move(options)) {}
  MemoryBackend(const MemoryBackend&) = delete;             ///< Not copyable.
  MemoryBackend& operator=(const MemoryBackend&) = delete;  ///< Not copyable.

  /// The backend's clock now: MemoryOptions::clock, or `Clock::now()` without one.
  time_point now() const { return options_.clock() ? options_.clock()() : Clock::now(); }
  /// How long an applied idempotent commit is remembered (MemoryOptions::idempotency_retention).
  milliseconds idempotency_retention() const { return options_.idempotency_retention(); }

  // ---- leases and fencing -------------------------------------------------------------------

  /// Acquires (or, for the same owner, extends) the lease on `resource` for `ttl` (1 ms to 7
  /// days) from now(). A new lease gets token = high-water mark + 1; registration of the resource
  /// is not needed. Idempotent for the same owner: re-acquiring extends the live lease with the
  /// same token.
  /// @throws LeaseNotAvailableError if another owner holds a live lease (not retryable).
  asio::awaitable<Lease> acquire_lease(std::string resource, std::string owner,
                                       milliseconds ttl = std::chrono::seconds(30)) {
    detail::validate_name("resource name", resource);
    detail::validate_name("owner", owner);
    detail::validate_ttl(ttl);
    std::lock_guard guard(mu_);
    co_return detail::decide_acquire(leases_[resource], resource, owner, ttl, now());
  }

  /// Extends `lease` to now() + `ttl` (default: the lease's own ttl) while it is the current live
  /// lease (same owner and token).
  /// @throws LeaseLostError if it expired, was released, superseded or never existed (not
  /// retryable).
  asio::awaitable<Lease> renew_lease(Lease lease, std::optional<milliseconds> ttl = std::nullopt) {
    detail::validate_lease(lease);
    const milliseconds t = ttl.value_or(lease.ttl);
    detail::validate_ttl(t);
    std::lock_guard guard(mu_);
    auto it = leases_.find(lease.resource);
    // A resource never leased answers like any lease that is no longer current: released, with
    // high-water mark 0, as Redis and PostgreSQL do.
    if (it == leases_.end()) {
      detail::LeaseState never_leased;
      co_return detail::decide_renew(never_leased, lease, t, now());
    }
    co_return detail::decide_renew(it->second, lease, t, now());
  }

  /// Releases `lease`: true if it was the current lease and is now released, false otherwise.
  /// The high-water mark stays, so its token is never issued again.
  asio::awaitable<bool> release_lease(Lease lease) {
    detail::validate_lease(lease);
    std::lock_guard guard(mu_);
    auto it = leases_.find(lease.resource);
    co_return it != leases_.end() && detail::decide_release(it->second, lease);
  }

  /// The highest token ever issued for `resource`, 0 if none.
  asio::awaitable<Token> current_fence(std::string resource) {
    detail::validate_name("resource name", resource);
    std::lock_guard guard(mu_);
    auto it = leases_.find(resource);
    co_return it == leases_.end() ? 0 : it->second.high_water;
  }

  // ---- inspection and revoke (InspectableBackend) --------------------------------------------

  /// Every live lease whose resource matches `glob` (all without one), sorted by name bytewise;
  /// one consistent snapshot, `expires_in` measured by now().
  /// @throws InvalidArgumentError for a malformed glob.
  asio::awaitable<std::vector<LeaseInfo>> list_leases(std::optional<std::string> glob = {}) {
    if (glob) detail::validate_glob(*glob);
    std::vector<LeaseInfo> out;
    {
      std::lock_guard guard(mu_);
      const time_point t = now();
      for (const auto& [name, state] : leases_)
        if (state.live_at(t) && detail::glob_accepts(glob, name))
          out.push_back(info_of(name, *state.current, t));
    }
    std::sort(out.begin(), out.end(),
              [](const LeaseInfo& a, const LeaseInfo& b) { return a.resource < b.resource; });
    co_return out;
  }

  /// The live lease on `resource`, or empty.
  asio::awaitable<std::optional<LeaseInfo>> lease_holder(std::string resource) {
    detail::validate_name("resource name", resource);
    std::lock_guard guard(mu_);
    const time_point t = now();
    auto it = leases_.find(resource);
    if (it == leases_.end() || !it->second.live_at(t)) co_return std::nullopt;
    co_return info_of(resource, *it->second.current, t);
  }

  /// Every registered resource matching `glob` (all without one), sorted by name bytewise.
  /// @throws InvalidArgumentError for a malformed glob.
  asio::awaitable<std::vector<ResourceInfo>> list_resources(std::optional<std::string> glob = {}) {
    if (glob) detail::validate_glob(*glob);
    std::vector<ResourceInfo> out;
    {
      std::lock_guard guard(mu_);
      for (const auto& [name, data] : resources_)
        if (detail::glob_accepts(glob, name))
          out.push_back(ResourceInfo{name, data.version, data.policy});
    }
    std::sort(out.begin(), out.end(),
              [](const ResourceInfo& a, const ResourceInfo& b) { return a.name < b.name; });
    co_return out;
  }

  /// Ends the current lease (live, or expired and not taken over) and raises the high-water mark
  /// past its token, in one step under the mutex: the holder's commits and renewals fail with
  /// LeaseLostError from then on. Empty, and nothing changes, when there is no lease or it was
  /// released.
  asio::awaitable<std::optional<RevokedLease>> revoke_lease(std::string resource) {
    detail::validate_name("resource name", resource);
    std::lock_guard guard(mu_);
    auto it = leases_.find(resource);
    if (it == leases_.end() || !it->second.current) co_return std::nullopt;
    auto& state = it->second;
    RevokedLease out{detail::to_lease(resource, *state.current), 0};
    state.high_water = std::max(state.high_water, state.current->token) + 1;
    state.current.reset();
    out.fence = state.high_water;
    co_return out;
  }

  // ---- state ---------------------------------------------------------------------------------

  /// Creates the resource with its state and policy in one step (true); an existing one is left
  /// as it is, policy included (false). `initial_state` is a JSON object of valid values; its
  /// keys start at version 0.
  /// @throws InvalidArgumentError for a bad name or state.
  asio::awaitable<bool> register_resource(std::string name, Value initial_state = Value::object(),
                                          ResourcePolicy policy = {}) {
    detail::validate_initial_state(name, initial_state);
    std::lock_guard guard(mu_);
    auto [it, created] = resources_.try_emplace(name);
    if (created) {
      it->second.policy = policy;
      for (auto& [key, value] : initial_state.items()) it->second.entries[key] = Entry{value, 0};
    }
    co_return created;
  }

  /// Replaces the resource's policy; commits after it see the new one.
  /// @throws ResourceNotFoundError when the resource is not registered.
  asio::awaitable<void> set_resource_policy(std::string name, ResourcePolicy policy) {
    detail::validate_name("resource name", name);
    std::lock_guard guard(mu_);
    auto it = resources_.find(name);
    if (it == resources_.end()) throw ResourceNotFoundError(name);
    it->second.policy = policy;
    co_return;
  }

  /// The resource's policy.
  /// @throws ResourceNotFoundError when the resource is not registered.
  asio::awaitable<ResourcePolicy> resource_policy(std::string name) {
    detail::validate_name("resource name", name);
    std::lock_guard guard(mu_);
    co_return find_resource(name).policy;
  }

  /// read_now() as a coroutine.
  asio::awaitable<Entry> read(std::string resource, std::string key) {
    co_return read_now(resource, key);
  }

  /// snapshot_now() as a coroutine.
  asio::awaitable<std::vector<ResourceSnapshot>> snapshot(std::vector<std::string> resources) {
    co_return snapshot_now(resources);
  }

  // ---- sessions ------------------------------------------------------------------------------

  /// begin_session_now() as a coroutine.
  asio::awaitable<SessionId> begin_session(std::vector<std::string> resources, Isolation mode) {
    co_return begin_session_now(resources, mode);
  }

  /// Takes a shared or exclusive lock on `key` for `session` and returns the key's latest entry
  /// under the lock. A lock that is not free waits in FIFO order (upgrades first) up to
  /// `timeout`, measured by a steady timer on the caller's executor (real time, not the backend's
  /// clock). Cancelling the awaiting coroutine withdraws the wait and throws
  /// `std::system_error(operation_aborted)`, unless the lock was granted first; locks already
  /// held stay until commit or end_session(). Destroying the coroutine mid-wait also withdraws it.
  /// @throws DeadlockError (retryable) at once if waiting would close a wait cycle.
  /// @throws LockTimeoutError (retryable) if not granted within `timeout`.
  /// @throws ResourceNotFoundError when the resource is not registered.
  asio::awaitable<Entry> lock(SessionId session, std::string resource, std::string key,
                              LockMode mode, milliseconds timeout) {
    detail::validate_name("resource name", resource);
    detail::validate_name("key", key);
    const std::string lock_key = lock_key_of(resource, key);
    const auto ex = co_await asio::this_coro::executor;
    std::shared_ptr<LockWaiter> waiter;
    {
      std::lock_guard guard(mu_);
      const auto& data = find_resource(resource);
      std::uint64_t ticket = 0;
      switch (locks_.acquire(session, lock_key, mode, ticket)) {
        case detail::LockTable::Outcome::granted:
          co_return entry_of(data, key);
        case detail::LockTable::Outcome::deadlock:
          throw detail::lock_deadlock(mode, resource, key);
        case detail::LockTable::Outcome::must_wait:
          break;
      }
      waiter = std::make_shared<LockWaiter>(ex);
      waiters_[ticket] = waiter;
      waiter->ticket = ticket;
    }
    // If this coroutine is destroyed while it waits (its io_context shut down), the wait must not
    // stay queued: it would be granted the lock later, and its channel is bound to a dead
    // io_context. Normal exits below dismiss this guard after doing the same under the mutex.
    AbandonedWait abandoned(this, waiter, session, lock_key);
    // The timer and the granting thread both post into a thread-safe channel, so whichever comes
    // first wakes the waiter and the other is a no-op.
    asio::steady_timer timer(ex, timeout);
    timer.async_wait([waiter](std::error_code ec) {
      if (!ec) waiter->channel.try_send(std::error_code(asio::error::timed_out), 0);
    });
    auto [ec, unused] =
        co_await waiter->channel.async_receive(asio::experimental::as_tuple(asio::use_awaitable));
    timer.cancel();
    abandoned.waiter = nullptr;
    std::vector<detail::LockTable::Grant> granted;
    {
      std::lock_guard guard(mu_);
      waiters_.erase(waiter->ticket);
      if (locks_.holds(session, lock_key, mode)) co_return entry_of(find_resource(resource), key);
      granted = locks_.cancel_wait(session, lock_key);
    }
    wake(granted);
    if (ec == asio::error::timed_out) throw detail::lock_timed_out(timeout, mode, resource, key);
    throw std::system_error(ec ? ec : make_error_code(asio::error::operation_aborted),
                            "lock wait cancelled");
  }

  /// Releases every lock and wait of `session` and wakes the waiters now granted; never waits.
  void end_session(SessionId session) noexcept {
    std::vector<detail::LockTable::Grant> granted;
    {
      std::lock_guard guard(mu_);
      granted = locks_.release_all(session);
    }
    wake(granted);
  }

  /// commit_now() as a coroutine.
  asio::awaitable<CommitResult> commit(CommitRequest req) { co_return commit_now(std::move(req)); }

  // ---- the same operations as plain calls (InlineBackend): nothing here waits ----------------

  /// The latest committed entry of `key` (`Entry{}` if never written; no value with a version: a
  /// tombstone).
  /// @throws ResourceNotFoundError when the resource is not registered.
  Entry read_now(const std::string& resource, const std::string& key) {
    detail::validate_name("resource name", resource);
    detail::validate_name("key", key);
    std::lock_guard guard(mu_);
    return entry_of(find_resource(resource), key);
  }

  /// One consistent copy of every named resource, tombstones included, in the order asked.
  /// @throws ResourceNotFoundError for the first unregistered resource.
  std::vector<ResourceSnapshot> snapshot_now(const std::vector<std::string>& resources) {
    for (const auto& r : resources) detail::validate_name("resource name", r);
    std::vector<ResourceSnapshot> out;
    out.reserve(resources.size());
    std::lock_guard guard(mu_);
    for (const auto& r : resources) {
      const auto& data = find_resource(r);
      ResourceSnapshot snap{r, data.version, {}};
      snap.entries.insert(data.entries.begin(), data.entries.end());
      out.push_back(std::move(snap));
    }
    return out;
  }

  /// A pessimistic lock that is free now: granted, returning the key's latest entry. Otherwise
  /// nothing changes (empty) and the caller waits through lock().
  /// @throws ResourceNotFoundError when the resource is not registered.
  std::optional<Entry> try_lock_now(SessionId session, const std::string& resource,
                                    const std::string& key, LockMode mode) {
    detail::validate_name("resource name", resource);
    detail::validate_name("key", key);
    std::lock_guard guard(mu_);
    const auto& data = find_resource(resource);
    if (!locks_.try_acquire(session, lock_key_of(resource, key), mode)) return std::nullopt;
    return entry_of(data, key);
  }

  /// A new session id over `resources`, after checking that they exist; the isolation changes
  /// nothing here.
  /// @throws ResourceNotFoundError for an unregistered resource.
  SessionId begin_session_now(const std::vector<std::string>& resources, Isolation) {
    std::lock_guard guard(mu_);
    for (const auto& r : resources) find_resource(r);
    return ++next_session_;
  }

  /// Applies `req` atomically, or nothing: idempotent replay, resources, fences, fence-required
  /// policies and read checks are checked before anything is written (see the Backend concept);
  /// then the session's locks are released. With an idempotency key the commit is idempotent: a
  /// resend within the retention returns the stored result with `replayed` set.
  /// @throws ConflictError (retryable) if a checked key's version moved.
  /// @throws LeaseLostError if a fence token is older than the high-water mark (not retryable).
  /// @throws FenceRequiredError if a fence-required resource is written without a token.
  /// @throws IdempotencyKeyReusedError if the key was used for a different request.
  /// @throws ResourceNotFoundError for an unregistered resource.
  /// @throws InvalidArgumentError for a bad request or a fence token never issued.
  CommitResult commit_now(CommitRequest req) {
    detail::validate_commit(req);
    CommitResult result;
    std::vector<detail::LockTable::Grant> granted;
    {
      std::lock_guard guard(mu_);
      // Only idempotent commits, or records waiting to expire, need the clock.
      const bool timed = req.idempotency_key || !idempotency_order_.empty();
      const time_point t = timed ? now() : time_point();
      if (timed) purge_idempotency(t);
      if (req.idempotency_key) {
        auto it = idempotency_.find(*req.idempotency_key);
        // An expired record may still wait for its purge: it counts as gone.
        if (it != idempotency_.end() && it->second.expires > t) {
          if (it->second.fingerprint != req.fingerprint)
            detail::raise(detail::CommitRefusal::key_reused(), req);
          result = it->second.result;
          result.replayed = true;
          granted = locks_.release_all(req.session);
        }
      }
      if (!result.replayed) {
        result = apply(req);
        if (req.idempotency_key) {
          const time_point expires = t + options_.idempotency_retention();
          idempotency_[*req.idempotency_key] = IdempotencyRecord{req.fingerprint, result, expires};
          idempotency_order_.emplace_back(expires, *req.idempotency_key);
        }
        granted = locks_.release_all(req.session);
      }
    }
    wake(granted);
    return result;
  }

 private:
  struct ResourceData {
    Version version = 0;
    ResourcePolicy policy;
    std::unordered_map<std::string, Entry> entries;
  };
  struct IdempotencyRecord {
    std::string fingerprint;
    CommitResult result;
    time_point expires;
  };
  struct LockWaiter {
    explicit LockWaiter(asio::any_io_executor ex) : channel(ex, 1) {}
    // void(error_code) alone is ambiguous in Asio 1.22's channel traits; the int is unused.
    asio::experimental::concurrent_channel<void(std::error_code, int)> channel;
    std::uint64_t ticket = 0;
  };

  // Withdraws a lock wait whose coroutine was destroyed mid-wait (see lock()).
  struct AbandonedWait {
    AbandonedWait(MemoryBackend* b, std::shared_ptr<LockWaiter> w, SessionId s, std::string k)
        : backend(b), waiter(std::move(w)), session(s), lock_key(std::move(k)) {}
    AbandonedWait(const AbandonedWait&) = delete;
    AbandonedWait& operator=(const AbandonedWait&) = delete;
    MemoryBackend* backend;
    std::shared_ptr<LockWaiter> waiter;
    SessionId session;
    std::string lock_key;
    ~AbandonedWait() {
      if (!waiter) return;
      std::vector<detail::LockTable::Grant> granted;
      {
        std::lock_guard guard(backend->mu_);
        backend->waiters_.erase(waiter->ticket);
        granted = backend->locks_.cancel_wait(session, lock_key);
      }
      backend->wake(granted);
    }
  };

  const ResourceData& find_resource(const std::string& name) const {
    auto it = resources_.find(name);
    if (it == resources_.end()) throw ResourceNotFoundError(name);
    return it->second;
  }

  static std::string lock_key_of(const std::string& resource, const std::string& key) {
    std::string k;
    k.reserve(resource.size() + 1 + key.size());
    k.append(resource).push_back('\0');
    k.append(key);
    return k;
  }

  static LeaseInfo info_of(const std::string& resource, const detail::LeaseRecord& r,
                           time_point t) {
    const auto left = std::chrono::duration_cast<milliseconds>(r.expires_at - t);
    return LeaseInfo{resource, r.owner, r.token, r.expires_at, r.ttl, left};
  }

  static Entry entry_of(const ResourceData& data, const std::string& key) {
    auto it = data.entries.find(key);
    return it == data.entries.end() ? Entry{} : it->second;
  }

  // Checks everything first and only then writes, so a failed commit changes nothing.
  CommitResult apply(CommitRequest& req) {
    auto registered = [&](const std::string& r) {
      if (resources_.find(r) == resources_.end())
        detail::raise(detail::CommitRefusal::not_found(r), req);
    };
    for (const auto& r : req.resources) registered(r);
    for (const auto& w : req.writes) registered(w.resource);
    for (const auto& f : req.fences) {
      auto it = leases_.find(f.resource);
      const Token high_water = it == leases_.end() ? 0 : it->second.high_water;
      if (detail::check_fence(high_water, f.token) != detail::FenceVerdict::ok)
        detail::raise(detail::CommitRefusal::bad_fence(f.resource, f.token, high_water), req);
    }
    // Fence-required resources: every written one needs a fence (proved current above).
    const std::string* unfenced = nullptr;
    for (const auto& w : req.writes) {
      if (!find_resource(w.resource).policy.fence_required) continue;
      const bool fenced =
          std::any_of(req.fences.begin(), req.fences.end(),
                      [&](const FenceCheck& f) { return f.resource == w.resource; });
      if (!fenced && (!unfenced || w.resource < *unfenced)) unfenced = &w.resource;
    }
    if (unfenced) detail::raise(detail::CommitRefusal::no_fence(*unfenced), req);
    for (const auto& c : req.checks) {
      const auto& entries = find_resource(c.resource).entries;
      const auto it = entries.find(c.key);
      const Version found = it == entries.end() ? 0 : it->second.version;
      if (found != c.expected_version)
        detail::raise(
            detail::CommitRefusal::conflict_on(c.resource, c.key, c.expected_version, found), req);
    }
    CommitResult result;
    // Nothing can fail from here on, so the values move into storage.
    for (auto& w : req.writes) {
      auto& data = resources_.find(w.resource)->second;
      auto [it, first] = result.versions.try_emplace(w.resource, data.version + 1);
      if (first) data.version = it->second;
      Entry& e = data.entries[w.key];
      e.value = std::move(w.value);
      e.version = data.version;
    }
    return result;
  }

  // At most this many expired records go per commit, so no commit (and nobody waiting for the
  // mutex meanwhile) pays for a large backlog: purging a million records that expired together
  // took one commit 2 s, and batches of 16 tripled the p99 commit while the backlog lasted, 4 only
  // 1.5x (statepact_bench_idempotency). A commit adds at most one record, so the backlog shrinks.
  static constexpr int purge_batch = 4;

  void purge_idempotency(time_point t) {
    for (int n = 0;
         n < purge_batch && !idempotency_order_.empty() && idempotency_order_.front().first <= t;
         ++n) {
      // A key purged and used again has a newer record: only its own expiry removes it.
      auto it = idempotency_.find(idempotency_order_.front().second);
      if (it != idempotency_.end() && it->second.expires <= t) idempotency_.erase(it);
      idempotency_order_.pop_front();
    }
  }

  void wake(const std::vector<detail::LockTable::Grant>& granted) noexcept {
    for (const auto& g : granted) {
      std::shared_ptr<LockWaiter> w;
      {
        std::lock_guard guard(mu_);
        auto it = waiters_.find(g.ticket);
        if (it != waiters_.end()) w = it->second;
      }
      if (w) w->channel.try_send(std::error_code(), 0);
    }
  }

  MemoryOptions options_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, ResourceData> resources_;
  std::unordered_map<std::string, detail::LeaseState> leases_;
  std::unordered_map<std::string, IdempotencyRecord> idempotency_;
  std::deque<std::pair<time_point, std::string>> idempotency_order_;
  detail::LockTable locks_;
  std::unordered_map<std::uint64_t, std::shared_ptr<LockWaiter>> waiters_;
  std::uint64_t next_session_ = 0;
};

static_assert(InlineBackend<MemoryBackend>);
static_assert(InspectableBackend<MemoryBackend>);

}  // namespace statepact
