// The PostgreSQL backend: durable leases, fencing and sessions on a PostgreSQL server (libpqxx).
// Blocking libpqxx calls run on the backend's own connection threads and complete on the calling
// coroutine's executor. Every lease operation, read, snapshot and commit is one statement calling a
// server-side function, so one round trip; the server's clock decides expiry. The implementation
// lives in src/postgres/; no libpqxx or libpq type appears here.
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
#include <statepact/inspect.hpp>
#include <statepact/types.hpp>

namespace statepact {

class PostgresOptions {
 public:
  PostgresOptions() = default;

  // Connections for single statements (leases, reads, snapshots, commits). Each pessimistic
  // session holds one more connection of its own while it is open.
  PostgresOptions& pool_size(std::size_t n);
  // The schema holding statepact's tables and functions; created if missing.
  PostgresOptions& schema(std::string name);
  // Server-side deadline of every statement (statement_timeout on each connection). 1 ms to
  // 1 hour (detail::max_timeout), as are the other timeouts below.
  PostgresOptions& statement_timeout(milliseconds d);
  // lock_timeout on each connection for statements other than a session's explicit lock(),
  // which uses the session's own timeout.
  PostgresOptions& lock_timeout(milliseconds d);
  // How long the server waits before it checks a lock wait for a deadlock (PostgreSQL's
  // deadlock_timeout, default 1 s), set in pessimistic sessions only when given. Setting it needs
  // a superuser or `GRANT SET ON PARAMETER deadlock_timeout` (PostgreSQL 15).
  PostgresOptions& deadlock_timeout(milliseconds d);
  // Time allowed to establish a connection (libpq connect_timeout, whole seconds, at least 2).
  PostgresOptions& connect_timeout(milliseconds d);
  // The client's own deadline on every call, waiting for a free connection and connecting
  // included: a server that stops answering (paused, partitioned) cannot outlast it. Past it a
  // call fails with BackendUnavailableError, or CommitUnknownError for a commit already sent.
  // Default: statement timeout + connect timeout + 1 s. A lock() is allowed at least its own
  // timeout + 1 s. Also libpq's tcp_user_timeout, so the kernel gives up on unacknowledged data.
  PostgresOptions& call_timeout(milliseconds d);
  // How long an idempotency record is kept (default 24 h, 1 ms to 365 days:
  // detail::max_idempotency_retention).
  PostgresOptions& idempotency_retention(milliseconds d);
  // application_name of every connection (pg_stat_activity), default "statepact".
  PostgresOptions& application_name(std::string name);
  // Pessimistic sessions open at once, each holding a connection and a thread (default 64, at
  // least 1). Past it begin_session fails at once with BackendUnavailableError (retryable:
  // nothing was sent; Manager::run backs off and tries again).
  PostgresOptions& max_pessimistic_sessions(std::size_t n);
  // idle_in_transaction_session_timeout of every connection (default 60 s, at most 1 hour): a
  // pessimistic session idle inside its transaction that long (a paused or partitioned holder)
  // is ended by the server, which frees its row locks; its next lock or commit fails with
  // BackendUnavailableError and nothing of it is applied.
  PostgresOptions& idle_in_transaction_timeout(milliseconds d);

  std::size_t pool_size() const { return pool_size_; }
  const std::string& schema() const { return schema_; }
  milliseconds statement_timeout() const { return statement_timeout_; }
  milliseconds lock_timeout() const { return lock_timeout_; }
  std::optional<milliseconds> deadlock_timeout() const { return deadlock_timeout_; }
  milliseconds connect_timeout() const { return connect_timeout_; }
  milliseconds call_timeout() const {
    return call_timeout_ ? *call_timeout_
                         : statement_timeout_ + connect_timeout_ + milliseconds(1000);
  }
  milliseconds idempotency_retention() const { return retention_; }
  const std::string& application_name() const { return application_name_; }
  std::size_t max_pessimistic_sessions() const { return max_pessimistic_sessions_; }
  milliseconds idle_in_transaction_timeout() const { return idle_in_transaction_timeout_; }

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
};

// One server setting that the backend's safety depends on, as check_server() found it.
struct PostgresServerSetting {
  std::string setting;  // e.g. "fsync"
  std::string value;    // as the server reported it
  bool ok = false;
  std::string advice;  // what to change and why; empty when ok
};

struct PostgresServerCheck {
  std::vector<PostgresServerSetting> settings;
  bool ok() const {
    for (const auto& s : settings)
      if (!s.ok) return false;
    return true;
  }
};

class PostgresBackend {
 public:
  // `url`: a libpq connection string or URI ("postgresql://user@host:5432/db"). Nothing connects
  // until the first operation; the schema is migrated on the first connection.
  PostgresBackend(asio::any_io_executor ex, std::string url,
                  PostgresOptions options = PostgresOptions());
  // Waits for operations in flight; rolls back sessions still open.
  ~PostgresBackend();
  PostgresBackend(const PostgresBackend&) = delete;
  PostgresBackend& operator=(const PostgresBackend&) = delete;

  // ---- leases and fencing -------------------------------------------------------------------
  asio::awaitable<Lease> acquire_lease(std::string resource, std::string owner,
                                       milliseconds ttl = std::chrono::seconds(30));
  asio::awaitable<Lease> renew_lease(Lease lease, std::optional<milliseconds> ttl = std::nullopt);
  asio::awaitable<bool> release_lease(Lease lease);
  asio::awaitable<Token> current_fence(std::string resource);

  // ---- inspection and revoke (InspectableBackend) --------------------------------------------
  // Each is one statement (schema version 3's functions); a listing is one consistent snapshot.
  asio::awaitable<std::vector<LeaseInfo>> list_leases(std::optional<std::string> glob = {});
  asio::awaitable<std::optional<LeaseInfo>> lease_holder(std::string resource);
  asio::awaitable<std::vector<ResourceInfo>> list_resources(std::optional<std::string> glob = {});
  asio::awaitable<std::optional<RevokedLease>> revoke_lease(std::string resource);

  // ---- administration ------------------------------------------------------------------------
  // Connects (which migrates the schema to the newest version, as every first connection does)
  // and returns the schema's version.
  asio::awaitable<int> migrate();
  // The newest schema version this library knows.
  static int latest_schema_version();
  // Reads the server settings that durability of tokens and commits depends on: fsync,
  // synchronous_commit, full_page_writes, whether the server is a standby, and the schema version.
  // Reads only (its connection migrates the schema first, as every first connection does).
  asio::awaitable<PostgresServerCheck> check_server();

  // ---- state ---------------------------------------------------------------------------------
  // Creates the resource with its state and policy in one step; an existing one is left as it
  // is, policy included (false).
  asio::awaitable<bool> register_resource(std::string name, Value initial_state = Value::object(),
                                          ResourcePolicy policy = {});
  // ResourceNotFoundError when the resource is not registered.
  asio::awaitable<void> set_resource_policy(std::string name, ResourcePolicy policy);
  asio::awaitable<ResourcePolicy> resource_policy(std::string name);
  asio::awaitable<Entry> read(std::string resource, std::string key);
  asio::awaitable<std::vector<ResourceSnapshot>> snapshot(std::vector<std::string> resources);

  // ---- sessions ------------------------------------------------------------------------------
  asio::awaitable<SessionId> begin_session(std::vector<std::string> resources, Isolation isolation);
  asio::awaitable<Entry> lock(SessionId session, std::string resource, std::string key,
                              LockMode mode, milliseconds timeout);
  void end_session(SessionId session) noexcept;
  asio::awaitable<CommitResult> commit(CommitRequest req);

  // Pessimistic sessions currently open (for tests and monitoring).
  std::size_t open_sessions() const;

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

static_assert(Backend<PostgresBackend>);
static_assert(InspectableBackend<PostgresBackend>);

}  // namespace statepact
