/// @file
/// A transaction over one or more resources. Reads go to storage (or to the session's snapshot);
/// writes are buffered and applied by commit(), atomically across resources, with the fence and the
/// isolation mode's validation checked by storage in the same step.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <asio/awaitable.hpp>

#include <statepact/backend.hpp>
#include <statepact/detail/fingerprint.hpp>
#include <statepact/detail/flat_map.hpp>
#include <statepact/detail/unknown_outcome.hpp>
#include <statepact/detail/validate.hpp>
#include <statepact/errors.hpp>
#include <statepact/observer.hpp>
#include <statepact/session_options.hpp>
#include <statepact/types.hpp>

namespace statepact {

/// A transaction over one or more resources of backend `B`: read, read_for_update, write and
/// erase, then commit() or abort(). Writes are buffered in the session and applied by commit()
/// all at once, or not at all; what reads see and what commit validates depends on the isolation
/// mode. After commit, abort or a failed commit the session is finished: using it again is a
/// UsageError.
///
/// Made by Manager::session() (or inside Manager::run()). Move-only; it keeps a pointer to the
/// backend, which must outlive it. Not thread-safe: a session belongs to one coroutine at a time
/// (different sessions may run concurrently, as far as the backend allows).
///
/// Cancellation (Asio): a request already sent to storage is not interrupted and completes;
/// only a pessimistic lock wait is withdrawn when cancelled. A cancelled coroutine gets
/// std::system_error(asio::error::operation_aborted) at its next co_await, before anything more
/// is sent.
template <Backend B>
class Session {
 public:
  /// Made by Manager::session(); `options` must be normalized and `id` come from the backend's
  /// begin_session for them. `observer` (may be null; not owned) hears of commits and lock waits.
  Session(B& backend, SessionOptions options, SessionId id, Observer* observer = nullptr)
      : backend_(&backend), options_(std::move(options)), id_(id), observer_(observer) {}

  /// Takes over `other`'s transaction; `other` is left finished (every call is a UsageError) and
  /// its destructor does nothing.
  Session(Session&& other) noexcept
      : backend_(other.backend_),
        options_(std::move(other.options_)),
        id_(other.id_),
        state_(std::exchange(other.state_, State::moved_from)),
        keys_(std::move(other.keys_)),
        snapshot_(std::move(other.snapshot_)),
        write_bytes_(other.write_bytes_),
        unresolved_(std::move(other.unresolved_)),
        resend_window_(other.resend_window_),
        observer_(other.observer_) {}
  Session& operator=(Session&&) = delete;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// A session dropped without commit aborts, releasing any locks it holds (without waiting).
  ~Session() {
    if (state_ == State::active) backend_->end_session(id_);
  }

  /// The agent the session writes for (SessionOptions::agent_id).
  const std::string& agent_id() const { return options_.agent_id(); }
  /// The session's isolation mode.
  Isolation isolation() const { return options_.isolation(); }
  /// The session's resources, sorted and without duplicates.
  const std::vector<std::string>& resources() const { return options_.resources(); }
  /// The backend's id for this session (its locks are held under it).
  SessionId id() const { return id_; }
  /// True until commit(), abort() or a failed commit finishes the session (false once moved from).
  bool active() const { return state_ == State::active; }
  /// True after commit() threw CommitUnknownError for a session with an idempotency key: the
  /// commit may or may not have been applied, and resend_commit() can find out.
  bool outcome_unknown() const { return state_ == State::unknown; }

  /// Reads `key` of the session's only resource: its value, or empty if the key is absent (never
  /// written, or erased). A key this session wrote or erased reads back the buffered value with
  /// no I/O. Otherwise, by isolation mode: none and optimistic read the latest committed value
  /// (one round trip); snapshot and serializable read the session's snapshot, one consistent
  /// copy of all its resources taken (one round trip) at its first read or write; pessimistic
  /// takes a shared lock on the key, waiting up to the session's lock_timeout. The first version
  /// read is what commit validates (optimistic, pessimistic, serializable).
  ///
  /// The single-resource forms leave the resource unset; it is resolved inside the coroutine, so
  /// every error surfaces at co_await. A failed read leaves the session active.
  /// @throws UsageError if the session is finished.
  /// @throws InvalidArgumentError if the session has several resources (name the resource), for a
  ///         bad key, or for a resource that is not one of the session's.
  /// @throws ResourceNotFoundError if the resource is not registered.
  /// @throws LockTimeoutError, DeadlockError (pessimistic; retryable: re-run the transaction).
  /// @throws BackendUnavailableError (retryable) or another backend error if storage fails.
  /// A cancelled lock wait is withdrawn (no lock is taken) and throws
  /// std::system_error(asio::error::operation_aborted).
  asio::awaitable<std::optional<Value>> read(std::string key) {
    return do_read(std::nullopt, std::move(key), false);
  }
  /// read(key) on the named resource, one of the session's.
  asio::awaitable<std::optional<Value>> read(std::string resource, std::string key) {
    return do_read(std::move(resource), std::move(key), false);
  }
  /// read(key), except that a pessimistic session takes the exclusive lock at once, so a later
  /// write needs no upgrade (upgrades of shared locks held by two sessions deadlock). Other modes:
  /// a plain read. Throws as read().
  asio::awaitable<std::optional<Value>> read_for_update(std::string key) {
    return do_read(std::nullopt, std::move(key), true);
  }
  /// read_for_update(key) on the named resource, one of the session's.
  asio::awaitable<std::optional<Value>> read_for_update(std::string resource, std::string key) {
    return do_read(std::move(resource), std::move(key), true);
  }

  /// Buffers `value` for `key` of the session's only resource; commit() applies it. Writing a key
  /// again replaces the buffered value, and reads of the key in this session see it. The value is
  /// checked here: finite numbers, strings and object keys of valid UTF-8 without U+0000, at most
  /// 100 levels deep and 1 MiB of JSON text, and at most 16 MiB for all the session's writes.
  /// Snapshot and serializable sessions take their snapshot here if no read did; a pessimistic
  /// session takes the key's exclusive lock (waiting up to lock_timeout). Nothing else goes to
  /// storage before commit. A failed write buffers nothing and leaves the session active.
  /// @throws UsageError if the session is finished.
  /// @throws InvalidArgumentError for a bad key or value, a resource not of the session, or a
  ///         session with several resources (name the resource).
  /// @throws ResourceNotFoundError, LockTimeoutError, DeadlockError, BackendUnavailableError as
  ///         read() (the lock errors are retryable).
  asio::awaitable<void> write(std::string key, Value value) {
    return do_write(std::nullopt, std::move(key), std::optional<Value>(std::move(value)));
  }
  /// write(key, value) on the named resource, one of the session's.
  asio::awaitable<void> write(std::string resource, std::string key, Value value) {
    return do_write(std::move(resource), std::move(key), std::optional<Value>(std::move(value)));
  }
  /// Buffers the erasure of `key` of the session's only resource (applied by commit(), which
  /// leaves a tombstone); a later read in this session sees the key absent. Throws as write().
  asio::awaitable<void> erase(std::string key) {
    return do_write(std::nullopt, std::move(key), std::optional<Value>());
  }
  /// erase(key) on the named resource, one of the session's.
  asio::awaitable<void> erase(std::string resource, std::string key) {
    return do_write(std::move(resource), std::move(key), std::optional<Value>());
  }

  /// Applies the buffered writes, or nothing. Whatever happens, the session is finished after; a
  /// commit with an idempotency key whose outcome is unknown can still be resent (resend_commit).
  ///
  /// One request to storage, which in one atomic step checks the session's fence tokens, the
  /// resources' fence policies and the isolation mode's read checks, then applies every write
  /// (each written resource's version + 1) and releases the session's locks. Locks are released
  /// whatever the outcome. With an idempotency key the commit is idempotent: an identical commit
  /// (same key, resources and writes) already applied is not applied again; storage answers
  /// with its stored result and `replayed` set. Without a key it is not idempotent.
  /// @returns the new version of each written resource, and whether it was a replay.
  /// @throws UsageError if the session is already finished.
  /// @throws ConflictError if a key's version moved (retryable: re-run the whole transaction).
  /// @throws LeaseLostError if a fence token is older than the resource's fence (not retryable:
  ///         stop, re-acquire, re-read).
  /// @throws FenceRequiredError if a written resource requires a fence and the session has none
  ///         for it (not retryable).
  /// @throws InvalidArgumentError for a fence token that was never issued.
  /// @throws ResourceNotFoundError, IdempotencyKeyReusedError (the key was used for a different
  ///         commit; not retryable).
  /// @throws BackendUnavailableError (retryable) if storage could not be reached: nothing applied.
  /// @throws CommitUnknownError if the connection was lost after sending: it may or may not have
  ///         been applied. Retryable only with an idempotency key; then outcome_unknown() is true.
  /// Every error but CommitUnknownError (another backend's error included, e.g. a PostgreSQL
  /// serialization failure: code() conflict, retryable) means nothing was applied. Once sent, a
  /// commit is not
  /// interrupted by cancellation: it completes and commit() answers its outcome; a cancellation
  /// that comes before the request is sent throws std::system_error(asio::error::operation_aborted)
  /// and applies nothing.
  asio::awaitable<CommitResult> commit() {
    require_active("commit");
    CommitRequest req = take_request();
    std::optional<CommitRequest> copy;  // what a resend must repeat exactly
    if (req.idempotency_key) {
      copy = req;
      // Counted from before the send: storage's record cannot be older than this.
      resend_window_ =
          detail::ResendWindow(std::chrono::steady_clock::now(), backend_->idempotency_retention());
    }
    const detail::ObserverTimer timer(observer_);
    const std::size_t writes = req.writes.size();
    state_ = State::failed;  // until storage says otherwise; locks are released below either way
    try {
      CommitResult result;
      if constexpr (InlineBackend<B>)
        result = backend_->commit_now(std::move(req));
      else
        result = co_await backend_->commit(std::move(req));
      state_ = State::committed;
      observe_commit(result.replayed ? CommitOutcome::replayed : CommitOutcome::applied, writes,
                     false, timer);
      co_return result;
    } catch (const CommitUnknownError&) {
      backend_->end_session(id_);
      if (copy) {
        unresolved_ = std::move(copy);
        state_ = State::unknown;
      }
      observe_commit(CommitOutcome::unknown, writes, false, timer);
      throw;
    } catch (...) {
      backend_->end_session(id_);
      if (observer_)
        observe_commit(detail::commit_outcome(std::current_exception()), writes, false, timer);
      throw;
    }
  }

  /// Sends the identical commit again (same idempotency key and fingerprint) after commit() threw
  /// CommitUnknownError: if the first one was applied, storage answers with its stored result
  /// (`replayed`); if not, this one is checked and applied as the first would have been.
  ///
  /// Only a refusal that proves nothing was applied (ConflictError, LeaseLostError,
  /// FenceRequiredError, ResourceNotFoundError, InvalidArgumentError, IdempotencyKeyReusedError)
  /// finishes the session as not applied. Any other failure (a lock or statement timeout, a lost
  /// connection, an unreadable reply, a server error) may come after the first send was applied,
  /// so the outcome stays unknown: it is thrown as CommitUnknownError (with the failure in its
  /// message) and resend_commit() may be called again.
  ///
  /// Storage remembers an applied commit only for its idempotency retention (the backend's
  /// idempotency_retention(), default 24 h) from when it applied it. A resend after that would be
  /// checked as a new commit, and could apply the first one a second time. So a resend is sent
  /// only within the first half of the retention, counted on the local steady clock from just
  /// before the first send (the other half covers clock rate differences and the time a request
  /// takes to arrive); after that resend_commit() sends nothing and throws a CommitUnknownError
  /// that is not retryable.
  /// @throws UsageError unless outcome_unknown() is true.
  /// @throws CommitUnknownError: still unknown. retryable() is false once the resend window has
  ///         closed (nothing was sent).
  /// @throws ConflictError, LeaseLostError, ... (the refusals above): the first send was not
  ///         applied either; the session is finished.
  /// Cancellation (std::system_error(asio::error::operation_aborted)) leaves the outcome unknown.
  asio::awaitable<CommitResult> resend_commit() {
    if (state_ != State::unknown)
      throw UsageError(fmt::format(
          "resend_commit() on a session of agent '{}' whose commit outcome is not unknown; only a "
          "commit with an idempotency key that threw CommitUnknownError can be resent",
          options_.agent_id()));
    if (!resend_window_.open(std::chrono::steady_clock::now()))
      throw CommitUnknownError(
          fmt::format("the outcome of the commit of agent '{}' stays unknown: its idempotency "
                      "record may have expired (retention {} ms from the first send), so a resend "
                      "could apply it twice; read the state to find out",
                      options_.agent_id(), backend_->idempotency_retention().count()),
          false);
    const detail::ObserverTimer timer(observer_);
    const std::size_t writes = unresolved_->writes.size();
    try {
      CommitResult result = co_await send(CommitRequest(*unresolved_));
      state_ = State::committed;
      unresolved_.reset();
      observe_commit(result.replayed ? CommitOutcome::replayed : CommitOutcome::applied, writes,
                     true, timer);
      co_return result;
    } catch (const CommitUnknownError&) {
      observe_commit(CommitOutcome::unknown, writes, true, timer);
      throw;
    } catch (const Error& e) {
      if (detail::proves_not_applied(e.code())) {
        state_ = State::failed;
        unresolved_.reset();
        if (observer_)
          observe_commit(detail::commit_outcome(std::current_exception()), writes, true, timer);
        throw;
      }
      observe_commit(CommitOutcome::unknown, writes, true, timer);
      throw CommitUnknownError(
          fmt::format("the outcome of a commit stays unknown: its resend failed with {} ({})",
                      to_string(e.code()), e.what()),
          true);
    }
  }

  /// Discards the buffered writes and releases locks (without waiting; never suspends). The
  /// session is finished after.
  /// @throws UsageError if the session is already finished.
  asio::awaitable<void> abort() {
    require_active("abort");
    state_ = State::aborted;
    backend_->end_session(id_);
    co_return;
  }

 private:
  enum class State { active, committed, aborted, failed, unknown, moved_from };
  using Key = std::pair<std::string, std::string>;  // (resource, key)

  const std::string& single_resource(const char* op) const {
    if (options_.resources().size() != 1)
      throw InvalidArgumentError(fmt::format(
          "{}(key) needs a single-resource session; this one has {} resources, so name the "
          "resource: {}(resource, key, ...)",
          op, options_.resources().size(), op));
    return options_.resources().front();
  }

  void require_active(const char* op) const {
    static constexpr const char* names[] = {"active",
                                            "committed",
                                            "aborted",
                                            "finished by a failed commit",
                                            "finished by a commit of unknown outcome",
                                            "moved from"};
    if (state_ != State::active)
      throw UsageError(
          fmt::format("{}() on a session of agent '{}' that was already {}; start a "
                      "new session",
                      op, options_.agent_id(), names[static_cast<int>(state_)]));
  }

  void check_target(const std::string& resource, const std::string& key) const {
    detail::validate_name("key", key);
    const auto& rs = options_.resources();
    if (!std::binary_search(rs.begin(), rs.end(), resource))
      throw InvalidArgumentError(fmt::format(
          "resource '{}' is not one of this session's resources; add it with .resource()",
          resource));
  }

  bool uses_snapshot() const {
    return isolation() == Isolation::snapshot || isolation() == Isolation::serializable;
  }

  // One round trip takes a consistent copy of every resource of the session.
  asio::awaitable<void> ensure_snapshot() {
    if (snapshot_) co_return;
    std::vector<ResourceSnapshot> snaps;
    if constexpr (InlineBackend<B>)
      snaps = backend_->snapshot_now(options_.resources());
    else
      snaps = co_await backend_->snapshot(options_.resources());
    std::sort(snaps.begin(), snaps.end(), [](const ResourceSnapshot& a, const ResourceSnapshot& b) {
      return a.resource < b.resource;
    });
    snapshot_ = std::move(snaps);
  }

  // Where the snapshot has the key; nullptr when the key is absent (never written).
  const Entry* snapshot_entry(const std::string& resource, const std::string& key) const {
    if (!snapshot_) throw UsageError("statepact: session snapshot used before it was taken");
    auto r = std::lower_bound(
        snapshot_->begin(), snapshot_->end(), resource,
        [](const ResourceSnapshot& s, const std::string& name) { return s.resource < name; });
    if (r == snapshot_->end() || r->resource != resource) throw ResourceNotFoundError(resource);
    auto it = r->entries.find(key);
    return it == r->entries.end() ? nullptr : &it->second;
  }
  Version snapshot_version(const std::string& resource, const std::string& key) const {
    const Entry* e = snapshot_entry(resource, key);
    return e ? e->version : 0;
  }

  asio::awaitable<std::optional<Value>> do_read(std::optional<std::string> resource,
                                                std::string key, bool for_update) {
    const char* op = for_update ? "read_for_update" : "read";
    require_active(op);
    Key k{resource ? std::move(*resource) : single_resource(op), std::move(key)};
    check_target(k.first, k.second);
    if (auto t = keys_.find(k); t != keys_.end() && t->second.write)
      co_return *t->second.write;  // read your own writes
    Entry entry;
    switch (isolation()) {
      case Isolation::none:
      case Isolation::optimistic:
        if constexpr (InlineBackend<B>)
          entry = backend_->read_now(k.first, k.second);
        else
          entry = co_await backend_->read(k.first, k.second);
        break;
      case Isolation::snapshot:
      case Isolation::serializable:
        co_await ensure_snapshot();
        if (const Entry* e = snapshot_entry(k.first, k.second)) entry = *e;
        break;
      case Isolation::pessimistic:
        entry = co_await lock(k, for_update ? LockMode::exclusive : LockMode::shared);
        break;
    }
    // The first version seen is what commit validates. (No iterator is kept across a co_await:
    // inserting into the flat map moves its elements.)
    auto& touched = keys_.try_emplace(std::move(k)).first->second;
    if (!touched.seen) touched.seen = entry.version;
    co_return std::move(entry.value);
  }

  asio::awaitable<void> do_write(std::optional<std::string> resource, std::string key,
                                 std::optional<Value> value) {
    const char* op = value ? "write" : "erase";
    require_active(op);
    Key k{resource ? std::move(*resource) : single_resource(op), std::move(key)};
    check_target(k.first, k.second);
    const std::size_t bytes = value ? detail::validate_value(*value) : 0;
    std::size_t total = write_bytes_ + bytes;
    if (auto t = keys_.find(k); t != keys_.end()) total -= t->second.bytes;
    if (total > detail::max_commit_bytes)
      throw InvalidArgumentError(fmt::format(
          "this write would bring the session's commit to {} bytes of JSON; at most {} are allowed",
          total, detail::max_commit_bytes));
    if (uses_snapshot()) co_await ensure_snapshot();  // a write-only session's snapshot point
    if (isolation() == Isolation::pessimistic) co_await lock(k, LockMode::exclusive);
    auto& touched = keys_.try_emplace(std::move(k)).first->second;
    touched.write = std::move(value);
    touched.bytes = bytes;
    write_bytes_ = total;
  }

  // Pessimistic: asks storage only for a lock the session does not hold yet.
  asio::awaitable<Entry> lock(const Key& k, LockMode mode) {
    if (auto t = keys_.find(k);
        t != keys_.end() && t->second.lock &&
        (t->second.lock->first == LockMode::exclusive || mode == LockMode::shared))
      co_return t->second.lock->second;
    Entry entry;
    std::optional<Entry> now;
    const detail::ObserverTimer timer(observer_);
    if constexpr (InlineBackend<B>) now = backend_->try_lock_now(id_, k.first, k.second, mode);
    if (now) {
      entry = std::move(*now);
    } else {
      try {
        entry = co_await backend_->lock(id_, k.first, k.second, mode, options_.lock_timeout());
      } catch (...) {
        if (observer_) observe_lock(k, mode, detail::lock_outcome(std::current_exception()), timer);
        throw;
      }
    }
    observe_lock(k, mode, LockOutcome::acquired, timer);
    keys_.try_emplace(k).first->second.lock = std::make_pair(mode, entry);
    co_return entry;
  }

  // The session is finished once it commits, so the buffered writes (and keys) move into the
  // request.
  CommitRequest take_request() {
    CommitRequest req;
    req.session = id_;
    req.agent_id = options_.agent_id();
    req.resources = options_.resources();
    req.fences = options_.fences();
    req.idempotency_key = options_.idempotency_key();
    std::size_t writes = 0;
    for (auto& [k, t] : keys_) {
      // What commit validates for this key, per mode; none validates nothing.
      std::optional<Version> expected;
      switch (isolation()) {
        case Isolation::none:
          break;
        case Isolation::optimistic:
        case Isolation::pessimistic:
          expected = t.seen;
          break;
        case Isolation::snapshot:  // first committer wins: only what it writes
          if (t.write) expected = snapshot_version(k.first, k.second);
          break;
        case Isolation::serializable:  // everything it read, and what it writes unread
          expected = t.seen;
          if (!expected && t.write) expected = snapshot_version(k.first, k.second);
          break;
      }
      if (expected) req.checks.push_back(ReadCheck{k.first, k.second, *expected});
      if (t.write) ++writes;
    }
    req.writes.reserve(writes);
    for (auto& [k, t] : keys_)
      if (t.write)
        req.writes.push_back(WriteOp{std::move(k.first), std::move(k.second), std::move(*t.write)});
    keys_ = {};
    if (req.idempotency_key) req.fingerprint = detail::fingerprint(req.resources, req.writes);
    return req;
  }

  // Everything the session did with one key.
  struct Touched {
    std::optional<Version> seen;                     // the first version read
    std::optional<std::optional<Value>> write;       // buffered; an empty value erases
    std::optional<std::pair<LockMode, Entry>> lock;  // pessimistic: held, and what it showed
    std::size_t bytes = 0;                           // the buffered value's JSON size
  };

  void observe_commit(CommitOutcome outcome, std::size_t writes, bool resend,
                      const detail::ObserverTimer& timer) const noexcept {
    if (!observer_) return;
    detail::notify(observer_, &Observer::on_commit,
                   CommitEventInfo{outcome, options_.agent_id(), options_.resources().size(),
                                   writes, resend, timer.elapsed()});
  }
  void observe_lock(const Key& k, LockMode mode, LockOutcome outcome,
                    const detail::ObserverTimer& timer) const noexcept {
    if (!observer_) return;
    detail::notify(observer_, &Observer::on_lock_wait,
                   LockWaitInfo{k.first, k.second, mode, outcome, timer.elapsed()});
  }

  asio::awaitable<CommitResult> send(CommitRequest req) {
    if constexpr (InlineBackend<B>)
      co_return backend_->commit_now(std::move(req));
    else
      co_return co_await backend_->commit(std::move(req));
  }

  B* backend_;
  SessionOptions options_;
  SessionId id_;
  State state_ = State::active;
  detail::FlatMap<Key, Touched> keys_;
  std::optional<std::vector<ResourceSnapshot>> snapshot_;  // sorted by resource
  std::size_t write_bytes_ = 0;                            // JSON size of the buffered writes
  std::optional<CommitRequest> unresolved_;                // State::unknown: what to resend
  detail::ResendWindow resend_window_;                     // State::unknown: until when
  Observer* observer_ = nullptr;                           // not owned; may be null
};

}  // namespace statepact
