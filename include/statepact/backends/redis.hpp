/// @file
/// RedisBackend: leases, fencing and sessions in a Redis server or Redis Cluster, over pipelined
/// connections driven by Asio. Pimpl: no hiredis type or header here. docs/backends/redis.md has
/// the key layout.
#pragma once

#include <chrono>
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
#include <statepact/detail/validate.hpp>
#include <statepact/errors.hpp>
#include <statepact/inspect.hpp>
#include <statepact/types.hpp>

namespace statepact {

/// Settings of a RedisBackend, read once when the backend is constructed; parameters of the
/// backend's URL override them. Each setter checks its value at once (`InvalidArgumentError` if
/// invalid, the options unchanged) and returns `*this` for chaining. A plain value type.
class RedisOptions {
 public:
  /// The defaults: prefix `statepact`, 5 s command and 2 s connect timeouts, 24 h idempotency
  /// retention, 60 s lock record ttl, no client name, eviction check on.
  RedisOptions() = default;

  /// Prepended to every key; non-empty and without '{' or '}' (they would break the hash tags).
  RedisOptions& key_prefix(std::string prefix) {
    if (prefix.empty() || prefix.find_first_of("{}") != std::string::npos)
      throw InvalidArgumentError("redis key prefix must be non-empty and contain no '{' or '}'");
    prefix_ = std::move(prefix);
    return *this;
  }
  /// Deadline of each command (default 5 s); a connection whose reply is late is dropped and
  /// replaced. 1 ms .. 1 hour (detail::max_timeout).
  RedisOptions& command_timeout(milliseconds d) {
    detail::validate_duration("redis command timeout", d, detail::max_timeout);
    command_timeout_ = d;
    return *this;
  }
  /// Time allowed to connect and set up a connection (default 2 s). 1 ms .. 1 hour.
  RedisOptions& connect_timeout(milliseconds d) {
    detail::validate_duration("redis connect timeout", d, detail::max_timeout);
    connect_timeout_ = d;
    return *this;
  }
  /// How long an idempotency record is kept (default 24 h; Redis key expiry purges it). 1 ms ..
  /// 365 days (detail::max_idempotency_retention).
  RedisOptions& idempotency_retention(milliseconds d) {
    detail::validate_duration("redis idempotency retention", d, detail::max_idempotency_retention);
    retention_ = d;
    return *this;
  }
  /// How long a pessimistic lock record outlives its last grant (default 60 s), so a crashed
  /// client's locks go; a session holding a lock longer may lose it. 1 ms .. 1 hour.
  RedisOptions& lock_record_ttl(milliseconds d) {
    detail::validate_duration("redis lock record ttl", d, detail::max_timeout);
    lock_ttl_ = d;
    return *this;
  }

  /// Sent as CLIENT SETNAME on every connection, so operators (and tests) can find it in CLIENT
  /// LIST. Printable ASCII without spaces; empty (the default): no name is set.
  RedisOptions& client_name(std::string name) {
    for (unsigned char c : name)
      if (c <= 0x20 || c >= 0x7F)
        throw InvalidArgumentError("redis client name must be printable ASCII without spaces");
    client_name_ = std::move(name);
    return *this;
  }

  /// UNSAFE. By default every new connection reads the server's maxmemory-policy (INFO memory) and
  /// refuses to work unless it is noeviction: a server that may evict keys can drop a fence counter
  /// (tokens issued twice), a version (versions repeat: lost updates) or an idempotency record
  /// (a commit applied twice). true skips the check; only for a server you know never evicts.
  RedisOptions& allow_eviction_unsafe(bool allow) {
    allow_eviction_ = allow;
    return *this;
  }

  /// How many resource names the backend remembers as registered (default 65,536; each costs
  /// about its length plus 64 bytes): a session over remembered names begins without a round
  /// trip, since resources are never removed and the commit checks them again. Past the limit the
  /// memory starts over. 0: every session begins by checking its resources on the server.
  RedisOptions& known_resources(std::size_t n) {
    known_resources_ = n;
    return *this;
  }

  /// Failover safety on a replicated server or cluster: every call that advances a fence or
  /// commits state (acquire, renew, revoke, register, set_resource_policy, commit) returns only
  /// once `n` replicas of its master have the write (Redis's WAIT, sent right behind it). When
  /// fewer confirm within replica_ack_timeout, the call fails without claiming success: a commit
  /// with CommitUnknownError, anything else with BackendUnavailableError (the lease may be held on
  /// the master but must not be used; acquiring again as the same owner is safe). 0 (the default):
  /// no waiting; docs/backends/redis.md says what each choice guarantees. 0 .. 16.
  RedisOptions& replicas_to_ack(int n) {
    if (n < 0 || n > 16) throw InvalidArgumentError("redis replicas_to_ack must be 0 .. 16");
    replicas_to_ack_ = n;
    return *this;
  }
  /// How long WAIT waits for the replicas (default 1 s); keep it below command_timeout, which
  /// bounds the call and its WAIT together. 1 ms .. 1 hour.
  RedisOptions& replica_ack_timeout(milliseconds d) {
    detail::validate_duration("redis replica ack timeout", d, detail::max_timeout);
    replica_ack_timeout_ = d;
    return *this;
  }
  /// More nodes of the same Redis Cluster, as "host:port" ("[::1]:7001" for IPv6), asked for the
  /// slot map when the URL's node is down. Ignored on a single server.
  RedisOptions& cluster_seeds(std::vector<std::string> seeds) {
    for (const auto& s : seeds) detail::parse_host_port("redis cluster seed", s);
    seeds_ = std::move(seeds);
    return *this;
  }

  /// Prepended to every key.
  const std::string& key_prefix() const { return prefix_; }
  /// Replicas that must confirm a write before it counts.
  int replicas_to_ack() const { return replicas_to_ack_; }
  /// How long WAIT waits for them.
  milliseconds replica_ack_timeout() const { return replica_ack_timeout_; }
  /// More cluster nodes to read the slot map from.
  const std::vector<std::string>& cluster_seeds() const { return seeds_; }
  /// How many resource names the backend remembers as registered.
  std::size_t known_resources() const { return known_resources_; }
  /// Whether the eviction check is skipped.
  bool allow_eviction_unsafe() const { return allow_eviction_; }
  /// The CLIENT SETNAME name; empty: none.
  const std::string& client_name() const { return client_name_; }
  /// Deadline of each command.
  milliseconds command_timeout() const { return command_timeout_; }
  /// Time allowed to connect.
  milliseconds connect_timeout() const { return connect_timeout_; }
  /// How long an idempotency record is kept.
  milliseconds idempotency_retention() const { return retention_; }
  /// How long a lock record outlives its last grant.
  milliseconds lock_record_ttl() const { return lock_ttl_; }

 private:
  std::string prefix_ = "statepact";
  std::string client_name_;
  milliseconds command_timeout_{5000};
  milliseconds connect_timeout_{2000};
  milliseconds retention_ = std::chrono::hours(24);
  milliseconds lock_ttl_{60000};
  bool allow_eviction_ = false;
  int replicas_to_ack_ = 0;
  milliseconds replica_ack_timeout_{1000};
  std::vector<std::string> seeds_;
  std::size_t known_resources_ = detail::KnownResources::default_capacity;
};

/// One server setting that the backend's safety depends on, as check_server() found it.
struct RedisServerSetting {
  std::string setting;  ///< e.g. "maxmemory-policy"
  std::string value;    ///< as the server reported it; "unknown" when it could not be read
  bool ok = false;      ///< whether the value is safe
  std::string advice;   ///< what to change and why; empty when ok
};

/// What RedisBackend::check_server() found: one entry per setting checked.
struct RedisServerCheck {
  /// maxmemory-policy, appendonly, appendfsync and replication, in that order (per node, on a
  /// cluster).
  std::vector<RedisServerSetting> settings;
  /// True when every setting is ok.
  bool ok() const {
    for (const auto& s : settings)
      if (!s.ok) return false;
    return true;
  }
};

/// What RedisBackend::upgrade_key_layout() did.
struct RedisKeyLayoutUpgrade {
  /// Names with a group whose keys were found in the earlier form.
  std::size_t resources = 0;
  /// Keys moved to the grouped form.
  std::size_t keys_moved = 0;
  /// Names used under the grouped form before the upgrade ran: the fence of the grouped form now
  /// holds the larger high-water mark of the two, and the earlier keys that would have
  /// overwritten a grouped one stay where they were (each named "<resource> <kind>").
  std::vector<std::string> left;
};

namespace detail {
class RedisImpl;
}

/// A Backend (and InspectableBackend) on one Redis server or a Redis Cluster (found out from the
/// node the URL names; docs/backends/redis.md, "Cluster"). Not copyable or movable; it must
/// outlive every Session, Manager and LeaseManager using it. Its calls may be made from any thread
/// and any number of coroutines at once: they share one pipelined connection per server (per
/// master on a cluster) driven on a strand of the backend's executor, and each call completes on
/// the awaiting coroutine's executor. On a cluster, a request over resources of several hash slots
/// (a session, commit or snapshot) is refused with `InvalidArgumentError` before anything is sent:
/// give such resources one group, the part of their names in braces (`{order-17}/items`).
///
/// Every operation is one Lua script (atomic, one round trip; the server's clock decides
/// expiry), except the listings and a lock() that waits. Input is checked before any I/O
/// (`InvalidArgumentError`). Failures common to every call: `BackendUnavailableError`
/// (retryable: not connected, a transient server state such as LOADING or READONLY, or the
/// connection lost under a non-commit call; a lease operation may then have happened, and
/// re-acquiring as the same owner is safe); `ConfigurationError` (authentication, permissions,
/// a database the server lacks, a server that may evict keys); a plain statepact::Error (code
/// backend_unavailable, not retryable) for a reply the scripts never give. Cancelling the
/// awaiting coroutine does not stop a command already given to the connection (only a lock()
/// wait): what it does (a lease acquired, a commit applied) stays, and the coroutine sees
/// `operation_aborted` at its next `co_await`.
class RedisBackend {
 public:
  /// A backend on the server at `url`: redis://[[user]:password@]host[:port][/db][?parameters]
  /// or unix:///path/to/socket; parameters (timeout, connect_timeout, client_name, ...:
  /// docs/backends/redis.md) override `options`. `ex` runs the connection. Connects on first use
  /// and again after a lost connection.
  /// @throws InvalidArgumentError for a malformed URL (the message never shows the password).
  RedisBackend(asio::any_io_executor ex, std::string url, RedisOptions options = RedisOptions());
  /// Closes the connection (gracefully: replies still due are read first).
  ~RedisBackend();
  RedisBackend(const RedisBackend&) = delete;             ///< Not copyable.
  RedisBackend& operator=(const RedisBackend&) = delete;  ///< Not copyable.

  /// Reads the server settings that fencing and commit safety depend on (docs/backends/redis.md,
  /// "Server settings that safety depends on"): maxmemory-policy, appendonly, appendfsync and
  /// replication. Changes nothing, and works on a server the backend refuses (it opens its own
  /// connection without the eviction check). On a cluster, every node of the slot map, each
  /// setting named "<host:port> <setting>"; a master's replication counts as safe when
  /// replicas_to_ack covers all its replicas. Throws only when a server cannot be reached.
  asio::awaitable<RedisServerCheck> check_server();

  /// Moves the keys that versions before Redis Cluster support wrote for names with a group (a
  /// `{...}` with something inside: "{order-17}/items") to the grouped form this version reads
  /// (docs/backends/redis.md, "Upgrading from an earlier version"). Until then such a resource
  /// looks unregistered and unleased, and its fence would start again. Run it once, with no client
  /// of the earlier version left running: one script per resource, each atomic; running it again
  /// finds nothing. Names without a group never moved. With replicas_to_ack, each script waits for
  /// the replicas.
  /// @throws InvalidArgumentError on a Redis Cluster when such keys are found there (earlier
  /// versions ran on one server only; keys of two slots cannot be moved in one script), having
  /// changed nothing.
  asio::awaitable<RedisKeyLayoutUpgrade> upgrade_key_layout();

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
  // Listing walks the server's keys with SCAN (a glob's literal prefix narrows it) and reads them
  // in batches, each batch one script with the server's time; a listing is not one snapshot.
  /// Every live lease whose resource matches `glob` (all without one), sorted by name,
  /// `expires_in` by the server's clock. Walks the keys with SCAN and reads them in batches: not
  /// one snapshot.
  /// @throws InvalidArgumentError for a malformed glob.
  asio::awaitable<std::vector<LeaseInfo>> list_leases(std::optional<std::string> glob = {});
  /// The live lease on `resource`, or empty.
  asio::awaitable<std::optional<LeaseInfo>> lease_holder(std::string resource);
  /// Every registered resource matching `glob` (all without one), sorted by name. Walks the keys
  /// with SCAN and reads them in batches: not one snapshot.
  /// @throws InvalidArgumentError for a malformed glob.
  asio::awaitable<std::vector<ResourceInfo>> list_resources(std::optional<std::string> glob = {});
  /// One script: ends the current lease (live, or expired and not yet taken over) and moves the
  /// fence (both keys) past its token, so the holder's commits and renewals fail with
  /// LeaseLostError. Empty, and nothing changes, when there is no lease or it was released.
  asio::awaitable<std::optional<RevokedLease>> revoke_lease(std::string resource);

  // ---- state ---------------------------------------------------------------------------------
  /// Creates the resource with its state and policy in one script (true); an existing resource
  /// keeps its own policy and state (false). `initial_state` is a JSON object of valid values;
  /// its keys start at version 0.
  /// @throws InvalidArgumentError for a bad name or state.
  asio::awaitable<bool> register_resource(std::string name, Value initial_state = Value::object(),
                                          ResourcePolicy policy = {});
  /// Replaces the resource's policy.
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
  /// Starts a session over `resources`, checking that they exist; no server-side state is opened
  /// for any isolation.
  /// @throws ResourceNotFoundError for an unregistered resource.
  /// @throws InvalidArgumentError on a cluster, for resources of several hash slots.
  asio::awaitable<SessionId> begin_session(std::vector<std::string> resources, Isolation isolation);
  /// Takes a shared or exclusive lock on `key` for `session` and returns the key's latest entry
  /// under the lock. A lock that cannot be granted is polled (1 to 20 ms, jittered) from a place in
  /// the key's FIFO queue until `timeout` (local steady clock). A lock record expires
  /// lock_record_ttl after its last grant. Cancelling the awaiting coroutine ends the wait
  /// (`operation_aborted`); locks already held stay until commit() or end_session().
  /// @throws LockTimeoutError (retryable) if not granted within `timeout`.
  /// @throws DeadlockError (retryable) if waiting would close a wait cycle.
  /// @throws ResourceNotFoundError when the resource is not registered.
  asio::awaitable<Entry> lock(SessionId session, std::string resource, std::string key,
                              LockMode mode, milliseconds timeout);
  /// Releases the session's locks without waiting (the unlock script is sent and not awaited; if
  /// it is lost, the records expire).
  void end_session(SessionId session) noexcept;
  /// Applies `req` atomically in one script, or nothing: idempotent replay, resources, fences,
  /// fence-required policies and read checks are checked before anything is written (see the
  /// Backend concept), then the session's locks are released. With an idempotency key the commit
  /// is idempotent (a resend returns the stored result with `replayed` set); the record lives in
  /// the slot of the first resource, so reuse of a key with another first resource is not seen.
  /// @throws ConflictError (retryable) if a checked key's version moved.
  /// @throws LeaseLostError if a fence token is older than the high-water mark (not retryable).
  /// @throws FenceRequiredError if a fence-required resource is written without a token.
  /// @throws IdempotencyKeyReusedError if the key was used for a different request.
  /// @throws ResourceNotFoundError for an unregistered resource.
  /// @throws InvalidArgumentError for a bad request or a fence token never issued.
  /// @throws CommitUnknownError if the connection was lost, or command_timeout passed, after the
  /// commit was sent: it may have been applied (retryable only with an idempotency key).
  /// Cancelling the awaiting coroutine does not stop a commit already sent: it may still apply.
  asio::awaitable<CommitResult> commit(CommitRequest req);
  /// How long an applied idempotent commit is remembered (RedisOptions::idempotency_retention).
  milliseconds idempotency_retention() const;

 private:
  std::shared_ptr<detail::RedisImpl> impl_;
};

static_assert(Backend<RedisBackend>);
static_assert(InspectableBackend<RedisBackend>);

}  // namespace statepact
