// RedisBackend: leases, fencing and sessions in a Redis server, over one pipelined connection
// driven by Asio. Pimpl: no hiredis type or header here. docs/backends/redis.md has the key layout.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>

#include <statepact/backend.hpp>
#include <statepact/commit_request.hpp>
#include <statepact/detail/validate.hpp>
#include <statepact/errors.hpp>
#include <statepact/inspect.hpp>
#include <statepact/types.hpp>

namespace statepact {

class RedisOptions {
 public:
  RedisOptions() = default;

  // Prepended to every key; must not contain '{' or '}' (they would break the hash tags).
  RedisOptions& key_prefix(std::string prefix) {
    if (prefix.empty() || prefix.find_first_of("{}") != std::string::npos)
      throw InvalidArgumentError("redis key prefix must be non-empty and contain no '{' or '}'");
    prefix_ = std::move(prefix);
    return *this;
  }
  // Deadline of each command; a connection whose reply is late is dropped and replaced.
  // 1 ms .. 1 hour (detail::max_timeout).
  RedisOptions& command_timeout(milliseconds d) {
    detail::validate_duration("redis command timeout", d, detail::max_timeout);
    command_timeout_ = d;
    return *this;
  }
  // 1 ms .. 1 hour.
  RedisOptions& connect_timeout(milliseconds d) {
    detail::validate_duration("redis connect timeout", d, detail::max_timeout);
    connect_timeout_ = d;
    return *this;
  }
  // How long an idempotency record is kept (Redis key expiry purges it). 1 ms .. 365 days
  // (detail::max_idempotency_retention).
  RedisOptions& idempotency_retention(milliseconds d) {
    detail::validate_duration("redis idempotency retention", d, detail::max_idempotency_retention);
    retention_ = d;
    return *this;
  }
  // How long a pessimistic lock record outlives its last grant, so a crashed client's locks go.
  // 1 ms .. 1 hour.
  RedisOptions& lock_record_ttl(milliseconds d) {
    detail::validate_duration("redis lock record ttl", d, detail::max_timeout);
    lock_ttl_ = d;
    return *this;
  }

  // Sent as CLIENT SETNAME on every connection, so operators (and tests) can find it in CLIENT
  // LIST.
  RedisOptions& client_name(std::string name) {
    for (unsigned char c : name)
      if (c <= 0x20 || c >= 0x7F)
        throw InvalidArgumentError("redis client name must be printable ASCII without spaces");
    client_name_ = std::move(name);
    return *this;
  }

  // UNSAFE. By default every new connection reads the server's maxmemory-policy (INFO memory) and
  // refuses to work unless it is noeviction: a server that may evict keys can drop a fence counter
  // (tokens issued twice), a version (versions repeat: lost updates) or an idempotency record
  // (a commit applied twice). true skips the check; only for a server you know never evicts.
  RedisOptions& allow_eviction_unsafe(bool allow) {
    allow_eviction_ = allow;
    return *this;
  }

  const std::string& key_prefix() const { return prefix_; }
  bool allow_eviction_unsafe() const { return allow_eviction_; }
  const std::string& client_name() const { return client_name_; }
  milliseconds command_timeout() const { return command_timeout_; }
  milliseconds connect_timeout() const { return connect_timeout_; }
  milliseconds idempotency_retention() const { return retention_; }
  milliseconds lock_record_ttl() const { return lock_ttl_; }

 private:
  std::string prefix_ = "statepact";
  std::string client_name_;
  milliseconds command_timeout_{5000};
  milliseconds connect_timeout_{2000};
  milliseconds retention_ = std::chrono::hours(24);
  milliseconds lock_ttl_{60000};
  bool allow_eviction_ = false;
};

// One server setting that the backend's safety depends on, as check_server() found it.
struct RedisServerSetting {
  std::string setting;  // e.g. "maxmemory-policy"
  std::string value;    // as the server reported it; "unknown" when it could not be read
  bool ok = false;
  std::string advice;  // what to change and why; empty when ok
};

struct RedisServerCheck {
  std::vector<RedisServerSetting> settings;
  bool ok() const {
    for (const auto& s : settings)
      if (!s.ok) return false;
    return true;
  }
};

namespace detail {
class RedisImpl;
}

class RedisBackend {
 public:
  // url: redis://[[user]:password@]host[:port][/db][?parameters] or unix:///path/to/socket;
  // parameters (timeout, connect_timeout, client_name, ...: docs/backends/redis.md) override
  // `options`. A malformed URL is an InvalidArgumentError that never shows the password. Connects
  // on first use and again after a lost connection.
  RedisBackend(asio::any_io_executor ex, std::string url, RedisOptions options = RedisOptions());
  ~RedisBackend();
  RedisBackend(const RedisBackend&) = delete;
  RedisBackend& operator=(const RedisBackend&) = delete;

  // Reads the server settings that fencing and commit safety depend on (docs/backends/redis.md,
  // "Server settings that safety depends on"): maxmemory-policy, appendonly, appendfsync and
  // replication. Changes nothing, and works on a server the backend refuses (it opens its own
  // connection without the eviction check). Throws only when the server cannot be reached.
  asio::awaitable<RedisServerCheck> check_server();

  // ---- leases and fencing -------------------------------------------------------------------
  asio::awaitable<Lease> acquire_lease(std::string resource, std::string owner,
                                       milliseconds ttl = std::chrono::seconds(30));
  asio::awaitable<Lease> renew_lease(Lease lease, std::optional<milliseconds> ttl = std::nullopt);
  asio::awaitable<bool> release_lease(Lease lease);
  asio::awaitable<Token> current_fence(std::string resource);

  // ---- inspection and revoke (InspectableBackend) --------------------------------------------
  // Listing walks the server's keys with SCAN (a glob's literal prefix narrows it) and reads them
  // in batches, each batch one script with the server's time; a listing is not one snapshot.
  asio::awaitable<std::vector<LeaseInfo>> list_leases(std::optional<std::string> glob = {});
  asio::awaitable<std::optional<LeaseInfo>> lease_holder(std::string resource);
  asio::awaitable<std::vector<ResourceInfo>> list_resources(std::optional<std::string> glob = {});
  // One script: ends the current lease and moves the fence (both keys) past its token.
  asio::awaitable<std::optional<RevokedLease>> revoke_lease(std::string resource);

  // ---- state ---------------------------------------------------------------------------------
  // The policy is stored with the resource, in the same script: an existing resource keeps its
  // own (and its state).
  asio::awaitable<bool> register_resource(std::string name, Value initial_state = Value::object(),
                                          ResourcePolicy policy = {});
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

 private:
  std::shared_ptr<detail::RedisImpl> impl_;
};

static_assert(Backend<RedisBackend>);
static_assert(InspectableBackend<RedisBackend>);

}  // namespace statepact
