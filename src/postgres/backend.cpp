// PostgresBackend: validation before any I/O (the same checks as every backend), then one job on
// a connection thread per operation. The rules themselves live in the server-side functions of
// schema_v1.sql and schema_v2.sql; this file maps their answers to statepact's types and errors.
#include <atomic>
#include <functional>
#include <mutex>
#include <system_error>
#include <unordered_map>

#include <fmt/format.h>
#include <asio/error.hpp>

#include <statepact/backends/postgres.hpp>
#include <statepact/detail/lease_rules.hpp>
#include <statepact/detail/lock_errors.hpp>
#include <statepact/detail/validate.hpp>
#include <statepact/errors.hpp>

#include "call.hpp"
#include "commit_codec.hpp"
#include "failures.hpp"
#include "migrate.hpp"
#include "statements.hpp"
#include "worker.hpp"

namespace statepact {

namespace pg = detail::pg;

namespace {

time_point from_us(long long us) {
  return time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::microseconds(us)));
}

std::optional<Value> json_field(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return Value::parse(f.c_str());
}

std::string names_json(const std::vector<std::string>& names) {
  return Value(names).dump();
}

// The connection string with libpq's connect_timeout (whole seconds; libpq treats less than 2
// as 2) appended, in the string's own syntax.
// libpq's connect_timeout (whole seconds, at least 2) and tcp_user_timeout (the kernel drops a
// connection whose sent data stays unacknowledged that long, so a partition frees the thread).
std::string with_client_timeouts(const std::string& url, milliseconds connect, milliseconds call) {
  const long long secs = std::max<long long>(2, (connect.count() + 999) / 1000);
  if (url.rfind("postgresql://", 0) == 0 || url.rfind("postgres://", 0) == 0)
    return fmt::format("{}{}connect_timeout={}&tcp_user_timeout={}", url,
                       url.find('?') == std::string::npos ? '?' : '&', secs, call.count());
  return fmt::format("{} connect_timeout={} tcp_user_timeout={}", url, secs, call.count());
}

// A job with no one waiting for it (the rollback of an ended session).
class DetachedJob final : public pg::Job {
 public:
  explicit DetachedJob(std::function<void(pg::Link&)> fn) : fn_(std::move(fn)) {}
  void run(pg::Link& link) noexcept override {
    try {
      fn_(link);
    } catch (...) {
    }
  }
  void abandon() noexcept override {}

 private:
  std::function<void(pg::Link&)> fn_;
};

// Rolls back the session's transaction, if any; a failure means the connection is gone anyway.
void roll_back(pg::Link& link) noexcept {
  if (!link.tx) return;
  try {
    link.tx->abort();
    link.tx.reset();
  } catch (...) {
    link.drop();
  }
}

}  // namespace

// ---- the implementation object ----------------------------------------------------------------

class PostgresBackend::Impl {
 public:
  // A pessimistic session's own connection thread; reused by later sessions once idle.
  struct SessionConn {
    std::shared_ptr<pg::JobQueue> queue = std::make_shared<pg::JobQueue>();
    std::shared_ptr<pg::CancelPoint> cancel = std::make_shared<pg::CancelPoint>();
    std::unique_ptr<pg::Worker> worker;
  };

  Impl(asio::any_io_executor ex, std::string url, PostgresOptions o)
      : executor(std::move(ex)),
        options(std::move(o)),
        shared(std::make_shared<pg::Shared>(pg::Settings{
            with_client_timeouts(url, options.connect_timeout(), options.call_timeout()),
            options.schema(), options.application_name(), options.statement_timeout(),
            options.lock_timeout(), pg::conninfo_secrets(url),
            pg::redact(url, pg::conninfo_secrets(url)), options.idle_in_transaction_timeout()})) {
    for (std::size_t i = 0; i < options.pool_size(); ++i)
      pool.push_back(std::make_unique<pg::Worker>(pool_queue, shared));
  }

  ~Impl() {
    pool_queue->close();
    std::vector<std::shared_ptr<SessionConn>> sessions;
    {
      std::lock_guard guard(mu);
      sessions = all_sessions;
    }
    for (auto& s : sessions) s->queue->close();
    pool.clear();  // joins
    for (auto& s : sessions) s->worker.reset();
  }

  std::shared_ptr<SessionConn> take_idle() {
    std::lock_guard guard(mu);
    if (!idle.empty()) {
      auto sc = std::move(idle.back());
      idle.pop_back();
      return sc;
    }
    // Idle connections are reused first, so the threads never outnumber the cap either.
    if (all_sessions.size() >= options.max_pessimistic_sessions())
      throw BackendUnavailableError(fmt::format(
          "{} pessimistic sessions are open, the most PostgresOptions::max_pessimistic_sessions "
          "allows; nothing was sent: end sessions (or raise the limit) and try again",
          all_sessions.size()));
    auto sc = std::make_shared<SessionConn>();
    try {
      sc->worker = std::make_unique<pg::Worker>(sc->queue, shared);
    } catch (const std::system_error& e) {
      throw BackendUnavailableError(
          fmt::format("cannot start a thread for a pessimistic session: {}", e.what()));
    }
    all_sessions.push_back(sc);
    return sc;
  }

  void give_back(std::shared_ptr<SessionConn> sc) {
    std::lock_guard guard(mu);
    idle.push_back(std::move(sc));
  }

  // On the session's own thread (after whatever is queued there): rolls back what is open, then
  // offers the connection to the next session. Never waits.
  void release(std::shared_ptr<SessionConn> sc) noexcept {
    try {
      sc->queue->push(std::make_unique<DetachedJob>([this, sc](pg::Link& link) {
        roll_back(link);
        give_back(sc);
      }));
    } catch (...) {
      // Out of memory: the transaction stays open until the backend closes its connection.
    }
  }

  pg::Deadline deadline(pg::Outcome outcome = pg::Outcome::nothing_applied,
                        bool has_idempotency_key = false) const {
    return pg::Deadline{options.call_timeout(), outcome, has_idempotency_key};
  }

  std::shared_ptr<SessionConn> find_open(SessionId id) {
    std::lock_guard guard(mu);
    auto it = open.find(id);
    return it == open.end() ? nullptr : it->second;
  }

  std::shared_ptr<SessionConn> take_open(SessionId id) {
    std::lock_guard guard(mu);
    auto it = open.find(id);
    if (it == open.end()) return nullptr;
    auto sc = std::move(it->second);
    open.erase(it);
    return sc;
  }

  asio::any_io_executor executor;
  PostgresOptions options;
  std::shared_ptr<pg::Shared> shared;
  std::shared_ptr<pg::JobQueue> pool_queue = std::make_shared<pg::JobQueue>();
  std::vector<std::unique_ptr<pg::Worker>> pool;

  mutable std::mutex mu;
  std::vector<std::shared_ptr<SessionConn>> all_sessions;
  std::vector<std::shared_ptr<SessionConn>> idle;
  std::unordered_map<SessionId, std::shared_ptr<SessionConn>> open;
  std::atomic<SessionId> next_session{0};
  std::atomic<std::uint64_t> next_seq{0};
};

PostgresBackend::PostgresBackend(asio::any_io_executor ex, std::string url, PostgresOptions options)
    : impl_([&] {
        try {
          return std::make_shared<Impl>(std::move(ex), std::move(url), std::move(options));
        } catch (const std::system_error& e) {
          throw BackendUnavailableError(
              fmt::format("cannot start the PostgreSQL backend's threads: {}", e.what()));
        }
      }()) {}

PostgresBackend::~PostgresBackend() = default;

std::size_t PostgresBackend::open_sessions() const {
  std::lock_guard guard(impl_->mu);
  return impl_->open.size();
}

// ---- leases and fencing -----------------------------------------------------------------------

asio::awaitable<Lease> PostgresBackend::acquire_lease(std::string resource, std::string owner,
                                                      milliseconds ttl) {
  detail::validate_name("resource name", resource);
  detail::validate_name("owner", owner);
  detail::validate_ttl(ttl);
  auto job = [resource, owner, ttl](pg::Link& link) {
    auto r =
        pg::autocommit(link, pg::Outcome::nothing_applied, false, [&](pqxx::nontransaction& t) {
          return t.exec_prepared(pg::stmt::acquire.name, resource, owner,
                                 static_cast<long long>(ttl.count()));
        });
    const auto row = r.at(0);
    Lease lease{resource, row[1].as<std::string>(), row[2].as<Token>(),
                from_us(row[3].as<long long>()), milliseconds(row[4].as<long long>())};
    if (row[0].as<std::string>() == "busy")
      throw LeaseNotAvailableError(resource, owner, lease.owner, lease.token, lease.expires_at);
    return lease;
  };
  co_return co_await pg::call<Lease>(*impl_->pool_queue, impl_->deadline(), std::move(job));
}

asio::awaitable<Lease> PostgresBackend::renew_lease(Lease lease, std::optional<milliseconds> ttl) {
  detail::validate_lease(lease);
  const milliseconds t = ttl.value_or(lease.ttl);
  detail::validate_ttl(t);
  auto job = [lease, t](pg::Link& link) {
    auto r =
        pg::autocommit(link, pg::Outcome::nothing_applied, false, [&](pqxx::nontransaction& n) {
          return n.exec_prepared(pg::stmt::renew.name, lease.resource, lease.owner,
                                 static_cast<long long>(lease.token),
                                 static_cast<long long>(t.count()));
        });
    const auto row = r.at(0);
    const std::string status = row[0].as<std::string>();
    const Token high_water = row[1].as<Token>();
    if (status != "ok") {
      const auto loss = detail::lease_loss_named(status);
      if (!loss)
        throw Error(ErrorCode::backend_unavailable,
                    fmt::format("statepact_renew answered '{}', which this client does not know "
                                "(a newer schema?)",
                                status));
      throw detail::lease_lost(lease, high_water, *loss);
    }
    return Lease{lease.resource, lease.owner, lease.token, from_us(row[2].as<long long>()),
                 milliseconds(row[3].as<long long>())};
  };
  co_return co_await pg::call<Lease>(*impl_->pool_queue, impl_->deadline(), std::move(job));
}

asio::awaitable<bool> PostgresBackend::release_lease(Lease lease) {
  detail::validate_lease(lease);
  auto job = [lease](pg::Link& link) {
    auto r =
        pg::autocommit(link, pg::Outcome::nothing_applied, false, [&](pqxx::nontransaction& n) {
          return n.exec_prepared(pg::stmt::release.name, lease.resource, lease.owner,
                                 static_cast<long long>(lease.token));
        });
    return r.at(0)[0].as<bool>();
  };
  co_return co_await pg::call<bool>(*impl_->pool_queue, impl_->deadline(), std::move(job));
}

asio::awaitable<Token> PostgresBackend::current_fence(std::string resource) {
  detail::validate_name("resource name", resource);
  auto job = [resource](pg::Link& link) {
    auto r = pg::autocommit(link, pg::Outcome::read_only, false, [&](pqxx::nontransaction& n) {
      return n.exec_prepared(pg::stmt::current_fence.name, resource);
    });
    return r.at(0)[0].as<Token>();
  };
  co_return co_await pg::call<Token>(*impl_->pool_queue, impl_->deadline(), std::move(job));
}

// ---- inspection and revoke ---------------------------------------------------------------------

namespace {

std::vector<LeaseInfo> lease_rows(const pqxx::result& r, const std::optional<std::string>& glob) {
  std::vector<LeaseInfo> out;
  for (const auto& row : r) {
    LeaseInfo info;
    info.resource = row[0].as<std::string>();
    if (!detail::glob_accepts(glob, info.resource)) continue;
    info.owner = row[1].as<std::string>();
    info.token = row[2].as<Token>();
    const long long expires_us = row[3].as<long long>();
    info.expires_at = from_us(expires_us);
    info.ttl = milliseconds(row[4].as<long long>());
    info.expires_in = std::chrono::duration_cast<milliseconds>(
        std::chrono::microseconds(expires_us - row[5].as<long long>()));
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace

asio::awaitable<std::vector<LeaseInfo>> PostgresBackend::list_leases(
    std::optional<std::string> glob) {
  if (glob) detail::validate_glob(*glob);
  auto job = [glob](pg::Link& link) {
    const std::string prefix = glob ? detail::glob_literal_prefix(*glob) : std::string();
    auto r = pg::autocommit(link, pg::Outcome::read_only, false, [&](pqxx::nontransaction& n) {
      return n.exec_prepared(pg::stmt::live_leases.name, prefix, std::optional<std::string>());
    });
    return lease_rows(r, glob);
  };
  co_return co_await pg::call<std::vector<LeaseInfo>>(*impl_->pool_queue, impl_->deadline(),
                                                      std::move(job));
}

asio::awaitable<std::optional<LeaseInfo>> PostgresBackend::lease_holder(std::string resource) {
  detail::validate_name("resource name", resource);
  auto job = [resource](pg::Link& link) {
    auto r = pg::autocommit(link, pg::Outcome::read_only, false, [&](pqxx::nontransaction& n) {
      return n.exec_prepared(pg::stmt::live_leases.name, resource, resource);
    });
    auto rows = lease_rows(r, std::nullopt);
    return rows.empty() ? std::optional<LeaseInfo>() : std::optional<LeaseInfo>(rows.front());
  };
  co_return co_await pg::call<std::optional<LeaseInfo>>(*impl_->pool_queue, impl_->deadline(),
                                                        std::move(job));
}

asio::awaitable<std::vector<ResourceInfo>> PostgresBackend::list_resources(
    std::optional<std::string> glob) {
  if (glob) detail::validate_glob(*glob);
  auto job = [glob](pg::Link& link) {
    const std::string prefix = glob ? detail::glob_literal_prefix(*glob) : std::string();
    auto r = pg::autocommit(link, pg::Outcome::read_only, false, [&](pqxx::nontransaction& n) {
      return n.exec_prepared(pg::stmt::list_resources.name, prefix);
    });
    std::vector<ResourceInfo> out;
    for (const auto& row : r) {
      ResourceInfo info{row[0].as<std::string>(), row[1].as<Version>(),
                        ResourcePolicy{row[2].as<bool>()}};
      if (detail::glob_accepts(glob, info.name)) out.push_back(std::move(info));
    }
    return out;
  };
  co_return co_await pg::call<std::vector<ResourceInfo>>(*impl_->pool_queue, impl_->deadline(),
                                                         std::move(job));
}

asio::awaitable<std::optional<RevokedLease>> PostgresBackend::revoke_lease(std::string resource) {
  detail::validate_name("resource name", resource);
  auto job = [resource](pg::Link& link) {
    auto r = pg::autocommit(
        link, pg::Outcome::nothing_applied, false,
        [&](pqxx::nontransaction& n) { return n.exec_prepared(pg::stmt::revoke.name, resource); });
    const auto row = r.at(0);
    if (row[0].as<std::string>() != "revoked") return std::optional<RevokedLease>();
    RevokedLease out{Lease{resource, row[1].as<std::string>(), row[2].as<Token>(),
                           from_us(row[3].as<long long>()), milliseconds(row[4].as<long long>())},
                     row[5].as<Token>()};
    return std::optional<RevokedLease>(std::move(out));
  };
  co_return co_await pg::call<std::optional<RevokedLease>>(*impl_->pool_queue, impl_->deadline(),
                                                           std::move(job));
}

// ---- administration ---------------------------------------------------------------------------

int PostgresBackend::latest_schema_version() {
  return pg::latest_version();
}

asio::awaitable<int> PostgresBackend::migrate() {
  auto job = [](pg::Link& link) {
    auto r = pg::autocommit(link, pg::Outcome::read_only, false, [&](pqxx::nontransaction& n) {
      return n.exec("SELECT coalesce(max(version), 0) FROM statepact_schema_version");
    });
    return r.at(0)[0].as<int>();
  };
  co_return co_await pg::call<int>(*impl_->pool_queue, impl_->deadline(), std::move(job));
}

asio::awaitable<PostgresServerCheck> PostgresBackend::check_server() {
  auto job = [](pg::Link& link) {
    auto r = pg::autocommit(link, pg::Outcome::read_only, false, [&](pqxx::nontransaction& n) {
      return n.exec(
          "SELECT current_setting('fsync'), current_setting('synchronous_commit'), "
          "current_setting('full_page_writes'), pg_is_in_recovery()::text, "
          "(SELECT coalesce(max(version), 0) FROM statepact_schema_version)::text");
    });
    const auto row = r.at(0);
    auto setting = [](std::string name, std::string value, bool ok, std::string advice) {
      return PostgresServerSetting{std::move(name), std::move(value), ok,
                                   ok ? std::string() : std::move(advice)};
    };
    PostgresServerCheck check;
    const std::string fsync = row[0].as<std::string>();
    check.settings.push_back(setting(
        "fsync", fsync, fsync == "on",
        "fsync = on: without it a crash can lose or corrupt committed lease tokens and writes, "
        "and tokens are issued again"));
    const std::string sync = row[1].as<std::string>();
    check.settings.push_back(setting(
        "synchronous_commit", sync, sync != "off" && sync != "local",
        sync == "local"
            ? "synchronous_commit = on (or remote_apply): 'local' does not wait for a "
              "synchronous standby, so a failover can lose acknowledged tokens and commits"
            : "synchronous_commit = on: 'off' acknowledges commits before they are durable, so a "
              "crash can lose the last tokens issued and issue them again"));
    const std::string fpw = row[2].as<std::string>();
    check.settings.push_back(setting(
        "full_page_writes", fpw, fpw == "on",
        "full_page_writes = on: without it a crash during a page write can corrupt the tables"));
    const bool standby = row[3].as<std::string>() == "true";
    check.settings.push_back(
        setting("role", standby ? "standby" : "primary", !standby,
                "this server is a standby: writes fail; point the backend at the primary"));
    const int version = row[4].as<int>();
    check.settings.push_back(setting(
        "schema version", std::to_string(version), version == pg::latest_version(),
        fmt::format("this library knows schema versions up to {}: the schema was migrated by a "
                    "newer statepact; use that version's tools and backend",
                    pg::latest_version())));
    return check;
  };
  co_return co_await pg::call<PostgresServerCheck>(*impl_->pool_queue, impl_->deadline(),
                                                   std::move(job));
}

// ---- state ------------------------------------------------------------------------------------

asio::awaitable<bool> PostgresBackend::register_resource(std::string name, Value initial_state,
                                                         ResourcePolicy policy) {
  detail::validate_initial_state(name, initial_state);
  auto job = [name, state = initial_state.dump(), policy](pg::Link& link) {
    auto r =
        pg::autocommit(link, pg::Outcome::nothing_applied, false, [&](pqxx::nontransaction& n) {
          return n.exec_prepared(pg::stmt::register_resource.name, name, state,
                                 policy.fence_required);
        });
    return r.at(0)[0].as<bool>();
  };
  co_return co_await pg::call<bool>(*impl_->pool_queue, impl_->deadline(), std::move(job));
}

asio::awaitable<void> PostgresBackend::set_resource_policy(std::string name,
                                                           ResourcePolicy policy) {
  detail::validate_name("resource name", name);
  auto job = [name, policy](pg::Link& link) {
    auto r =
        pg::autocommit(link, pg::Outcome::nothing_applied, false, [&](pqxx::nontransaction& n) {
          return n.exec_prepared(pg::stmt::set_policy.name, name, policy.fence_required);
        });
    if (!r.at(0)[0].as<bool>()) throw ResourceNotFoundError(name);
    return 0;
  };
  co_await pg::call<int>(*impl_->pool_queue, impl_->deadline(), std::move(job));
}

asio::awaitable<ResourcePolicy> PostgresBackend::resource_policy(std::string name) {
  detail::validate_name("resource name", name);
  auto job = [name](pg::Link& link) {
    auto r = pg::autocommit(link, pg::Outcome::read_only, false, [&](pqxx::nontransaction& n) {
      return n.exec_prepared(pg::stmt::policy.name, name);
    });
    const auto f = r.at(0)[0];
    if (f.is_null()) throw ResourceNotFoundError(name);
    return ResourcePolicy{f.as<bool>()};
  };
  co_return co_await pg::call<ResourcePolicy>(*impl_->pool_queue, impl_->deadline(),
                                              std::move(job));
}

asio::awaitable<Entry> PostgresBackend::read(std::string resource, std::string key) {
  detail::validate_name("resource name", resource);
  detail::validate_name("key", key);
  auto job = [resource, key](pg::Link& link) {
    auto r = pg::autocommit(link, pg::Outcome::read_only, false, [&](pqxx::nontransaction& n) {
      return n.exec_prepared(pg::stmt::read.name, resource, key);
    });
    const auto row = r.at(0);
    if (!row[0].as<bool>()) throw ResourceNotFoundError(resource);
    return Entry{json_field(row[1]), row[2].as<Version>()};
  };
  co_return co_await pg::call<Entry>(*impl_->pool_queue, impl_->deadline(), std::move(job));
}

asio::awaitable<std::vector<ResourceSnapshot>> PostgresBackend::snapshot(
    std::vector<std::string> resources) {
  for (const auto& r : resources) detail::validate_name("resource name", r);
  auto job = [names = names_json(resources)](pg::Link& link) {
    auto r = pg::autocommit(link, pg::Outcome::read_only, false, [&](pqxx::nontransaction& n) {
      return n.exec_prepared(pg::stmt::snapshot.name, names);
    });
    std::vector<ResourceSnapshot> out;
    bool fresh = true;  // rows of one resource come together, in the order asked
    std::string last;
    for (const auto& row : r) {
      const std::string name = row[0].as<std::string>();
      if (!row[1].as<bool>()) throw ResourceNotFoundError(name);
      if (fresh || name != last) {
        out.push_back(ResourceSnapshot{name, row[2].as<Version>(), {}});
        last = name;
        fresh = false;
      }
      if (!row[3].is_null())
        out.back().entries[row[3].as<std::string>()] =
            Entry{json_field(row[4]), row[5].as<Version>()};
    }
    return out;
  };
  co_return co_await pg::call<std::vector<ResourceSnapshot>>(*impl_->pool_queue, impl_->deadline(),
                                                             std::move(job));
}

// ---- sessions ---------------------------------------------------------------------------------

asio::awaitable<SessionId> PostgresBackend::begin_session(std::vector<std::string> resources,
                                                          Isolation isolation) {
  for (const auto& r : resources) detail::validate_name("resource name", r);
  const std::string names = names_json(resources);
  auto check = [names](pqxx::transaction_base& t) {
    auto r = t.exec_prepared(pg::stmt::missing.name, names);
    if (!r.at(0)[0].is_null()) throw ResourceNotFoundError(r.at(0)[0].as<std::string>());
  };
  if (isolation != Isolation::pessimistic) {
    auto job = [check](pg::Link& link) {
      pg::autocommit(link, pg::Outcome::read_only, false,
                     [&](pqxx::nontransaction& n) { check(n); });
      return 0;
    };
    co_await pg::call<int>(*impl_->pool_queue, impl_->deadline(), std::move(job));
    co_return ++impl_->next_session;
  }
  // Pessimistic: a connection of its own with a real transaction, held until commit or end.
  auto sc = impl_->take_idle();
  auto job = [check](pg::Link& link) {
    pg::autocommit(link, pg::Outcome::nothing_applied, false,
                   [&](pqxx::nontransaction& n) { check(n); });
    roll_back(link);  // nothing should be open; never start a second transaction on it
    try {
      link.tx = std::make_unique<pqxx::work>(link.current());
    } catch (...) {
      pg::rethrow_mapped(link, pg::Outcome::nothing_applied, false);
    }
    return 0;
  };
  // On failure the connection goes back through its own thread, after the begin job: if that
  // job still runs (the deadline passed first), the transaction it opens is rolled back.
  std::exception_ptr failed;
  try {
    co_await pg::call<int>(*sc->queue, impl_->deadline(), std::move(job));
  } catch (...) {
    failed = std::current_exception();
  }
  if (failed) {
    impl_->release(sc);
    std::rethrow_exception(failed);
  }
  const SessionId id = ++impl_->next_session;
  {
    std::lock_guard guard(impl_->mu);
    impl_->open[id] = sc;
  }
  co_return id;
}

asio::awaitable<Entry> PostgresBackend::lock(SessionId session, std::string resource,
                                             std::string key, LockMode mode, milliseconds timeout) {
  detail::validate_name("resource name", resource);
  detail::validate_name("key", key);
  if (timeout <= milliseconds::zero()) throw InvalidArgumentError("lock timeout must be positive");
  auto sc = impl_->find_open(session);
  if (!sc)
    throw UsageError(
        fmt::format("lock() on session {}, which is not an open pessimistic session", session));
  const std::uint64_t seq = ++impl_->next_seq;
  const long long deadlock_ms =
      impl_->options.deadlock_timeout() ? impl_->options.deadlock_timeout()->count() : -1;
  auto job = [resource, key, mode, timeout, deadlock_ms, seq, cancel = sc->cancel](pg::Link& link) {
    if (!link.tx)
      throw BackendUnavailableError(
          "the session's transaction is gone (its connection failed or a statement failed); start "
          "a new session");
    pqxx::result r;
    cancel->arm(link.current(), seq);
    try {
      r = link.tx->exec_prepared(pg::stmt::lock.name, resource, key, mode == LockMode::exclusive,
                                 static_cast<long long>(timeout.count()), deadlock_ms);
      cancel->disarm();
    } catch (...) {
      // Any failure of the statement aborted the transaction: it is rolled back here, and the
      // session's later statements say it is gone.
      cancel->disarm();
      roll_back(link);
      pg::rethrow_mapped(link, pg::Outcome::nothing_applied, false);
    }
    const auto row = r.at(0);
    const std::string status = row[0].as<std::string>();
    if (status == "ok" || status == "missing")
      return Entry{json_field(row[1]), row[2].as<Version>()};
    if (status == "not_found") throw ResourceNotFoundError(resource);
    if (status == "deadlock") throw detail::lock_deadlock(mode, resource, key);
    if (status == "cancelled" && cancel->cancelled(seq))
      throw std::system_error(make_error_code(asio::error::operation_aborted),
                              "lock wait cancelled");
    // "timeout", or "cancelled" by statement_timeout.
    throw detail::lock_timed_out(timeout, mode, resource, key);
  };
  // The wait itself may take its whole timeout; the deadline only catches a server gone silent.
  pg::Deadline deadline = impl_->deadline();
  deadline.after = std::max(deadline.after, timeout + milliseconds(1000));
  co_return co_await pg::call<Entry>(*sc->queue, deadline, std::move(job), sc->cancel, seq);
}

void PostgresBackend::end_session(SessionId session) noexcept {
  try {
    auto sc = impl_->take_open(session);
    if (!sc) return;  // not pessimistic, or already committed
    // Never waits: the rollback runs on the session's own thread, which then offers the
    // connection to the next session.
    impl_->release(std::move(sc));
  } catch (...) {
  }
}

asio::awaitable<CommitResult> PostgresBackend::commit(CommitRequest req) {
  detail::validate_commit(req);
  std::string body = pg::encode_commit(req, impl_->options.idempotency_retention());
  const bool has_key = req.idempotency_key.has_value();
  auto sc = impl_->take_open(req.session);
  if (!sc) {
    auto job = [body = std::move(body), req = std::move(req), has_key](pg::Link& link) {
      auto r = pg::autocommit(
          link, pg::Outcome::commit_unknown, has_key,
          [&](pqxx::nontransaction& n) { return n.exec_prepared(pg::stmt::commit.name, body); });
      return detail::result_or_raise(pg::decode_commit(r.at(0)[0].c_str()), req);
    };
    co_return co_await pg::call<CommitResult>(
        *impl_->pool_queue, impl_->deadline(pg::Outcome::commit_unknown, has_key), std::move(job));
  }
  // A pessimistic session: the commit function runs in the session's transaction, then COMMIT
  // releases its locks. Until COMMIT is sent a lost connection means the server rolled back.
  Impl* impl = impl_.get();
  auto job = [body = std::move(body), req = std::move(req), has_key, impl, sc](pg::Link& link) {
    // However the job ends, the connection goes back with no transaction open.
    struct GiveBack {
      Impl* impl;
      std::shared_ptr<Impl::SessionConn> sc;
      pg::Link& link;
      ~GiveBack() {
        roll_back(link);
        impl->give_back(sc);
      }
    } give_back{impl, sc, link};
    if (!link.tx)
      throw BackendUnavailableError(
          "the session's transaction is gone (its connection failed or a statement failed); "
          "nothing was committed");
    // Until COMMIT is sent, every failure (a refusal included) means nothing was applied.
    CommitResult result;
    try {
      const auto answer = link.tx->exec_prepared(pg::stmt::commit.name, body);
      result = detail::result_or_raise(pg::decode_commit(answer.at(0)[0].c_str()), req);
    } catch (...) {
      roll_back(link);
      pg::rethrow_mapped(link, pg::Outcome::nothing_applied, has_key);
    }
    try {
      link.tx->commit();
      link.tx.reset();
    } catch (...) {
      // An error reply to COMMIT means it rolled back (mapped as such); a lost connection or
      // libpqxx's in-doubt error leave the outcome unknown.
      roll_back(link);
      pg::rethrow_mapped(link, pg::Outcome::commit_unknown, has_key);
    }
    return result;
  };
  // The deadline may pass while the job waits behind a stuck statement of the session: then it
  // never runs, and the session's transaction is rolled back and its connection handed back.
  auto skipped = [impl, sc](pg::Link& link) {
    roll_back(link);
    impl->give_back(sc);
  };
  co_return co_await pg::call<CommitResult>(*sc->queue,
                                            impl_->deadline(pg::Outcome::commit_unknown, has_key),
                                            std::move(job), nullptr, 0, std::move(skipped));
}

}  // namespace statepact
