/// @file
/// The PostgreSQL backend: durable leases, fencing and sessions on a PostgreSQL server (libpqxx).
/// Pool calls send their statement with libpq's non-blocking API and await the answer on the
/// calling coroutine's own executor; pessimistic sessions run blocking libpqxx calls on threads of
/// their own and complete on the calling coroutine's executor. Every lease operation, read,
/// snapshot and commit is one statement calling a server-side function, so one round trip; the
/// server's clock decides expiry. The implementation lives in src/postgres/; no libpqxx or libpq
/// type appears here.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>

#include <statepact/backend.hpp>
#include <statepact/commit_request.hpp>
#include <statepact/detail/known_resources.hpp>
#include <statepact/inspect.hpp>
#include <statepact/types.hpp>

namespace statepact {

/// Settings of a PostgresBackend, read once when the backend is constructed. Each setter checks
/// its value at once (`InvalidArgumentError` if out of bounds, the options unchanged) and returns
/// `*this` for chaining. A plain value type.
class PostgresOptions {
 public:
  /// The defaults: 4 connections, schema `public`, 30 s statement, 10 s lock and 5 s connect
  /// timeouts, 24 h idempotency retention, 64 pessimistic sessions, 60 s idle-in-transaction.
  PostgresOptions() = default;

  /// Connections for single statements (leases, reads, snapshots, commits), at least 1
  /// (default 4); a call that finds them all busy waits for one within call_timeout. One more
  /// connection, on a thread, migrates the schema and opens these. Each pessimistic session holds
  /// one more connection of its own while it is open.
  PostgresOptions& pool_size(std::size_t n);
  /// The schema holding statepact's tables and functions; created if missing (default `public`).
  /// A valid name (1 to 256 bytes of UTF-8, no control characters).
  PostgresOptions& schema(std::string name);
  /// Server-side deadline of every statement (statement_timeout on each connection, default
  /// 30 s). 1 ms to 1 hour (detail::max_timeout), as are the other timeouts below.
  PostgresOptions& statement_timeout(milliseconds d);
  /// lock_timeout on each connection (default 10 s) for statements other than a session's
  /// explicit lock(), which uses the session's own timeout.
  PostgresOptions& lock_timeout(milliseconds d);
  /// How long the server waits before it checks a lock wait for a deadlock (PostgreSQL's
  /// deadlock_timeout, default 1 s), set in pessimistic sessions only when given. Setting it needs
  /// a superuser or `GRANT SET ON PARAMETER deadlock_timeout` (PostgreSQL 15).
  PostgresOptions& deadlock_timeout(milliseconds d);
  /// Time allowed to establish a connection (default 5 s; passed to libpq's connect_timeout
  /// rounded up to whole seconds, at least 2).
  PostgresOptions& connect_timeout(milliseconds d);
  /// The client's own deadline on every call, waiting for a free connection and connecting
  /// included: a server that stops answering (paused, partitioned) cannot outlast it. Past it a
  /// call fails with BackendUnavailableError, or CommitUnknownError for a commit already sent.
  /// Default: statement timeout + connect timeout + 1 s. A lock() is allowed at least its own
  /// timeout + 1 s. Also libpq's tcp_user_timeout, so the kernel gives up on unacknowledged data.
  PostgresOptions& call_timeout(milliseconds d);
  /// How long an idempotency record is kept (default 24 h, 1 ms to 365 days:
  /// detail::max_idempotency_retention).
  PostgresOptions& idempotency_retention(milliseconds d);
  /// application_name of every connection (pg_stat_activity), default "statepact". A valid name.
  PostgresOptions& application_name(std::string name);
  /// Pessimistic sessions open at once, each holding a connection and a thread (default 64, at
  /// least 1). Past it begin_session fails at once with BackendUnavailableError (retryable:
  /// nothing was sent; Manager::run backs off and tries again).
  PostgresOptions& max_pessimistic_sessions(std::size_t n);
  /// idle_in_transaction_session_timeout of every connection (default 60 s, at most 1 hour): a
  /// pessimistic session idle inside its transaction that long (a paused or partitioned holder)
  /// is ended by the server, which frees its row locks; its next lock or commit fails with
  /// BackendUnavailableError and nothing of it is applied.
  PostgresOptions& idle_in_transaction_timeout(milliseconds d);
  /// How many resource names the backend remembers as registered (default 65,536; each costs
  /// about its length plus 64 bytes): a session over remembered names begins without a round
  /// trip, since resources are never removed and the commit checks them again. Past the limit the
  /// memory starts over. 0: every session begins by checking its resources on the server.
  PostgresOptions& known_resources(std::size_t n);

  /// Connections for single statements.
  std::size_t pool_size() const { return pool_size_; }
  /// The schema holding statepact's tables and functions.
  const std::string& schema() const { return schema_; }
  /// Server-side deadline of every statement.
  milliseconds statement_timeout() const { return statement_timeout_; }
  /// lock_timeout of statements other than an explicit lock().
  milliseconds lock_timeout() const { return lock_timeout_; }
  /// deadlock_timeout for pessimistic sessions; empty: the server's setting.
  std::optional<milliseconds> deadlock_timeout() const { return deadlock_timeout_; }
  /// Time allowed to establish a connection.
  milliseconds connect_timeout() const { return connect_timeout_; }
  /// The client-side deadline of every call: the value set, else statement timeout + connect
  /// timeout + 1 s.
  milliseconds call_timeout() const {
    return call_timeout_ ? *call_timeout_
                         : statement_timeout_ + connect_timeout_ + milliseconds(1000);
  }
  /// How long an idempotency record is kept.
  milliseconds idempotency_retention() const { return retention_; }
  /// application_name of every connection.
  const std::string& application_name() const { return application_name_; }
  /// Pessimistic sessions open at once, at most.
  std::size_t max_pessimistic_sessions() const { return max_pessimistic_sessions_; }
  /// idle_in_transaction_session_timeout of every connection.
  milliseconds idle_in_transaction_timeout() const { return idle_in_transaction_timeout_; }
  /// How many resource names the backend remembers as registered.
  std::size_t known_resources() const { return known_resources_; }

 private:
  std::size_t pool_size_ = 4;
  std::string schema_ = "public";
  milliseconds statement_timeout_{30000};
  milliseconds lock_timeout_{10000};
  std::optional<milliseconds> deadlock_timeout_;
  milliseconds connect_timeout_{5000};
  std::optional<milliseconds> call_timeout_;
  milliseconds retention_ = std::chrono::hours(24);
  std::string application_name_ = "statepact";
  std::size_t max_pessimistic_sessions_ = 64;
  milliseconds idle_in_transaction_timeout_ = std::chrono::seconds(60);
  std::size_t known_resources_ = detail::KnownResources::default_capacity;
};

/// One server setting that the backend's safety depends on, as check_server() found it.
struct PostgresServerSetting {
  std::string setting;  ///< e.g. "fsync", "synchronous_commit", "role", "schema version"
  std::string value;    ///< as the server reported it
  bool ok = false;      ///< whether the value is safe
  std::string advice;   ///< what to change and why; empty when ok
};

/// What PostgresBackend::check_server() found: one entry per setting checked.
struct PostgresServerCheck {
  std::vector<PostgresServerSetting> settings;  ///< fsync, synchronous_commit, ... in that order
  /// True when every setting is ok.
  bool ok() const {
    for (const auto& s : settings)
      if (!s.ok) return false;
    return true;
  }
};

/// A Backend (and InspectableBackend) on a PostgreSQL server. Not copyable or movable; it must
/// outlive every Session, Manager and LeaseManager using it. Its calls may be made from any
/// thread and any number of coroutines at once; each call completes on the awaiting coroutine's
/// executor, which runs its I/O (a pessimistic session's statements run on its own thread).
///
/// Each call is one statement (a pessimistic session adds BEGIN and COMMIT); input is checked
/// before any I/O (`InvalidArgumentError`). Failures common to every call:
/// `BackendUnavailableError` (retryable: the server could not be reached, the connection was lost
/// before a reply to a non-commit call, the statement timed out, no reply or no free connection
/// within call_timeout); `ConfigurationError` (authentication, permissions, a missing database or
/// schema); a plain statepact::Error (code backend_unavailable, not retryable) for a reply the
/// library does not know. Cancelling the awaiting coroutine does not stop a statement (only a
/// lock() wait): it runs to its end on the server, and what it did (a lease acquired, a commit
/// applied) stays; the coroutine sees `operation_aborted` at its next `co_await`.
class PostgresBackend {
 public:
  /// A backend on the server at `url`, a libpq connection string or URI
  /// ("postgresql://user@host:5432/db"). `ex` is kept by the backend; each call completes on the
  /// awaiting coroutine's own executor. Starts the backend's connection thread, but nothing
  /// connects until the first operation; the schema is migrated on the first connection.
  /// @throws BackendUnavailableError if the thread cannot be started.
  PostgresBackend(asio::any_io_executor ex, std::string url,
                  PostgresOptions options = PostgresOptions());
  /// Lets the connection threads finish every statement already queued, then joins them and
  /// closes the connections; a session still open is rolled back by the server. A pool call in
  /// flight finishes on its own executor, its connection closed after it.
  ~PostgresBackend();
  PostgresBackend(const PostgresBackend&) = delete;             ///< Not copyable.
  PostgresBackend& operator=(const PostgresBackend&) = delete;  ///< Not copyable.

  // ---- leases and fencing -------------------------------------------------------------------
  /// Acquires (or, for the same owner, extends) the lease on `resource` for `ttl` (1 ms to 7
  /// days), by the server's clock. A new lease gets token = high-water mark + 1; registration of
  /// the resource is not needed. Idempotent for the same owner: re-acquiring extends the live
  /// lease with the same token.
  /// @throws LeaseNotAvailableError if another owner holds a live lease (not retryable).
  asio::awaitable<Lease> acquire_lease(std::string resource, std::string owner,
                                       milliseconds ttl = std::chrono::seconds(30));
  /// Extends `lease` to now + `ttl` (default: the lease's own ttl), by the server's clock, while
  /// it is the current live lease (same owner and token).
  /// @throws LeaseLostError if it expired, was released, superseded or never existed (not
  /// retryable).
  asio::awaitable<Lease> renew_lease(Lease lease, std::optional<milliseconds> ttl = std::nullopt);
  /// Releases `lease`: true if it was the current lease and is now released, false otherwise.
  /// The high-water mark stays, so its token is never issued again.
  asio::awaitable<bool> release_lease(Lease lease);
  /// The highest token ever issued for `resource`, 0 if none.
  asio::awaitable<Token> current_fence(std::string resource);

  // ---- inspection and revoke (InspectableBackend) --------------------------------------------
  // Each is one statement (schema version 3's functions); a listing is one consistent snapshot.
  /// Every live lease whose resource matches `glob` (all without one), sorted by name; one
  /// consistent snapshot, `expires_in` measured by the server's clock.
  /// @throws InvalidArgumentError for a malformed glob.
  asio::awaitable<std::vector<LeaseInfo>> list_leases(std::optional<std::string> glob = {});
  /// The live lease on `resource`, or empty.
  asio::awaitable<std::optional<LeaseInfo>> lease_holder(std::string resource);
  /// Every registered resource matching `glob` (all without one), sorted by name; one consistent
  /// snapshot.
  /// @throws InvalidArgumentError for a malformed glob.
  asio::awaitable<std::vector<ResourceInfo>> list_resources(std::optional<std::string> glob = {});
  /// Ends the current lease on `resource` (live, or expired and not yet taken over) and raises
  /// the high-water mark to its token + 1, in one statement: the holder's commits and renewals
  /// fail with LeaseLostError from then on. Empty, and nothing changes, when there is no lease or
  /// it was released.
  asio::awaitable<std::optional<RevokedLease>> revoke_lease(std::string resource);

  // ---- administration ------------------------------------------------------------------------
  /// Connects (which migrates the schema to the newest version, as every first connection does)
  /// and returns the schema's version.
  /// @throws ConfigurationError if the role may not create the schema's objects.
  asio::awaitable<int> migrate();
  /// The newest schema version this library knows.
  static int latest_schema_version();
  /// Reads the server settings that durability of tokens and commits depends on: fsync,
  /// synchronous_commit, full_page_writes, whether the server is a standby, and the schema version.
  /// Reads only (its connection migrates the schema first, as every first connection does).
  asio::awaitable<PostgresServerCheck> check_server();

  // ---- state ---------------------------------------------------------------------------------
  /// Creates the resource with its state and policy in one step (true); an existing one is left
  /// as it is, policy included (false). `initial_state` is a JSON object of valid values; its
  /// keys start at version 0.
  /// @throws InvalidArgumentError for a bad name or state.
  asio::awaitable<bool> register_resource(std::string name, Value initial_state = Value::object(),
                                          ResourcePolicy policy = {});
  /// Replaces the resource's policy; commits that run after it see the new one.
  /// @throws ResourceNotFoundError when the resource is not registered.
  asio::awaitable<void> set_resource_policy(std::string name, ResourcePolicy policy);
  /// The resource's policy.
  /// @throws ResourceNotFoundError when the resource is not registered.
  asio::awaitable<ResourcePolicy> resource_policy(std::string name);
  /// The latest committed entry of `key` (`Entry{}` if never written; no value with a version: a
  /// tombstone).
  /// @throws ResourceNotFoundError when the resource is not registered.
  asio::awaitable<Entry> read(std::string resource, std::string key);
  /// One consistent copy of every named resource, tombstones included, in the order asked.
  /// @throws ResourceNotFoundError for the first unregistered resource.
  asio::awaitable<std::vector<ResourceSnapshot>> snapshot(std::vector<std::string> resources);

  // ---- sessions ------------------------------------------------------------------------------
  /// Starts a session over `resources`. A pessimistic one takes a connection and thread of its
  /// own and opens a transaction (READ COMMITTED) on it, held until commit() or end_session();
  /// other isolations only check the resources.
  /// @throws ResourceNotFoundError for an unregistered resource.
  /// @throws BackendUnavailableError (retryable) when max_pessimistic_sessions are already open.
  asio::awaitable<SessionId> begin_session(std::vector<std::string> resources, Isolation isolation);
  /// Takes a shared or exclusive lock on `key` for the pessimistic `session` (a row lock in its
  /// transaction), waiting up to `timeout`, and returns the key's latest entry under the lock.
  /// Cancelling the awaiting coroutine cancels the wait on the server (the coroutine gets
  /// `operation_aborted`); the session keeps its transaction and the locks it already holds.
  /// @throws LockTimeoutError (retryable) if not granted within `timeout`.
  /// @throws DeadlockError (retryable) if the server reports a deadlock.
  /// @throws ResourceNotFoundError when the resource is not registered.
  /// @throws InvalidArgumentError if `timeout` is not positive.
  /// @throws UsageError if `session` is not an open pessimistic session.
  /// @throws BackendUnavailableError if the session's transaction is gone (its connection failed
  /// or a statement of it failed): start a new session.
  asio::awaitable<Entry> lock(SessionId session, std::string resource, std::string key,
                              LockMode mode, milliseconds timeout);
  /// Ends `session` without waiting: a pessimistic session's transaction is rolled back (its
  /// locks freed) on its own thread, after anything still queued there. Does nothing for a
  /// session that committed or is not pessimistic.
  void end_session(SessionId session) noexcept;
  /// Applies `req` atomically, or nothing: idempotent replay, resources, fences, fence-required
  /// policies and read checks are checked before anything is written (see the Backend concept).
  /// A pessimistic session's commit runs in its transaction and ends it. With an idempotency
  /// key the commit is idempotent: resending the same request returns the stored result with
  /// `replayed` set.
  /// @throws ConflictError (retryable) if a checked key's version moved.
  /// @throws LeaseLostError if a fence token is older than the high-water mark (not retryable).
  /// @throws FenceRequiredError if a fence-required resource is written without a token.
  /// @throws IdempotencyKeyReusedError if the key was used for a different request.
  /// @throws ResourceNotFoundError for an unregistered resource.
  /// @throws InvalidArgumentError for a bad request or a fence token never issued.
  /// @throws CommitUnknownError if the connection was lost, or call_timeout passed, after the
  /// commit was sent: it may have been applied (retryable only with an idempotency key).
  /// Cancelling the awaiting coroutine does not stop a commit already queued: it may still apply.
  asio::awaitable<CommitResult> commit(CommitRequest req);

  /// Pessimistic sessions currently open (for tests and monitoring).
  std::size_t open_sessions() const;
  /// How long an applied idempotent commit is remembered
  /// (PostgresOptions::idempotency_retention).
  milliseconds idempotency_retention() const;

  /// The implementation (src/postgres/); not part of the API.
  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

static_assert(Backend<PostgresBackend>);
static_assert(InspectableBackend<PostgresBackend>);

}  // namespace statepact
