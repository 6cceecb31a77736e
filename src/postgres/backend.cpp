// PostgresBackend: validation before any I/O (the same checks as every backend), then one job on
// a connection thread per operation, whose answer rows the codecs (lease_codec, state_codec,
// commit_codec) read; the rules themselves live in the server-side functions of schema_v<n>.sql.
//
// Lifetimes, as in the Redis backend: whatever a piece of work touches is held by shared ownership.
// The state is a shared Impl, and every operation's coroutine holds it (`auto impl = impl_`) until
// it returns, so destroying the backend mid-call is safe. Jobs on connection threads hold only the
// shared pieces they use (the idle-session list), never the Impl: the Impl owns and joins those
// threads, so a job holding its last reference would destroy it on a thread it must join.
#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <unordered_map>

#include <fmt/format.h>
#include <asio/error.hpp>

#include <statepact/backends/postgres.hpp>
#include <statepact/detail/known_resources.hpp>
#include <statepact/detail/validate.hpp>
#include <statepact/detail/verdicts.hpp>
#include <statepact/errors.hpp>

#include "async_call.hpp"
#include "call.hpp"
#include "commit_codec.hpp"
#include "failures.hpp"
#include "jsonb_text.hpp"
#include "lease_codec.hpp"
#include "migrate.hpp"
#include "state_codec.hpp"
#include "statements.hpp"
#include "worker.hpp"

namespace statepact {

namespace pg = detail::pg;
using detail::LostReply;

namespace {

// The rows as text, for the codecs (which read answers without libpqxx).
pg::Rows rows_of(const pqxx::result& r) {
  pg::Rows rows;
  rows.reserve(r.size());
  for (const auto& row : r) {
    pg::Row& out = rows.emplace_back();
    out.reserve(row.size());
    for (const auto& f : row) out.push_back(f.is_null() ? pg::Field() : pg::Field(f.c_str()));
  }
  return rows;
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

// A pool connection, opened on the connection thread (which also migrates the schema once, on
// its own connection, before the first pool connection is made).
asio::awaitable<std::unique_ptr<pg::AsyncLink>> open_link(std::shared_ptr<pg::JobQueue> queue,
                                                          std::shared_ptr<pg::Shared> shared,
                                                          pg::Deadline deadline) {
  auto job = [shared](pg::Link& link) {
    link.connection();
    return pg::AsyncLink::open(shared->settings());
  };
  co_return co_await pg::call<std::unique_ptr<pg::AsyncLink>>(*queue, deadline, std::move(job));
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
    admin = std::make_unique<pg::Worker>(pool_queue, shared);
  }

  ~Impl() {
    async_pool->close();
    pool_queue->close();
    std::vector<std::shared_ptr<SessionConn>> sessions;
    {
      std::lock_guard guard(mu);
      sessions = all_sessions;
    }
    for (auto& s : sessions) s->queue->close();
    admin.reset();  // joins
    for (auto& s : sessions) s->worker.reset();
  }

  // The connections of ended sessions, ready for the next one; shared with the jobs that hand
  // a connection back.
  class IdleSessions {
   public:
    void put(std::shared_ptr<SessionConn> sc) {
      std::lock_guard guard(mu_);
      list_.push_back(std::move(sc));
    }
    std::shared_ptr<SessionConn> take() {
      std::lock_guard guard(mu_);
      if (list_.empty()) return nullptr;
      auto sc = std::move(list_.back());
      list_.pop_back();
      return sc;
    }

   private:
    std::mutex mu_;
    std::vector<std::shared_ptr<SessionConn>> list_;
  };

  std::shared_ptr<SessionConn> take_idle() {
    if (auto sc = idle->take()) return sc;
    std::lock_guard guard(mu);
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

  // On the session's own thread (after whatever is queued there): rolls back what is open, then
  // offers the connection to the next session. Never waits.
  void release(std::shared_ptr<SessionConn> sc) noexcept {
    try {
      sc->queue->push(std::make_unique<DetachedJob>([idle = idle, sc](pg::Link& link) {
        pg::roll_back(link);
        idle->put(sc);
      }));
    } catch (...) {
      // Out of memory: the transaction stays open until the backend closes its connection.
    }
  }

  pg::Deadline deadline(LostReply lost = LostReply::write()) const {
    return pg::Deadline{options.call_timeout(), lost};
  }

  // `run(AsyncLink&)`'s statements on a pool connection, in autocommit; the answer as text rows.
  template <class F>
  asio::awaitable<pg::Rows> on_pool(LostReply lost, F run) {
    // Named, not temporaries: g++ 12 may destroy a temporary argument twice inside co_await.
    auto open = [queue = pool_queue, shared = shared, d = deadline()] {
      return open_link(queue, shared, d);
    };
    co_return co_await pg::async_call(async_pool, deadline(lost), std::move(open), std::move(run));
  }

  // One prepared statement on a pool connection, in autocommit; its answer as text rows.
  template <class... Args>
  asio::awaitable<pg::Rows> query(LostReply lost, const char* statement, Args... args) {
    pg::Params params{pg::param(std::move(args))...};
    auto run = [statement, params](pg::AsyncLink& link) { return link.exec(statement, params); };
    co_return co_await on_pool(lost, std::move(run));
  }

  // A statement that answers only when the call succeeds and, when it has no row, the function
  // that says why (which may succeed itself by then): one statement in the common case, both on
  // the same connection.
  template <class... Args>
  asio::awaitable<pg::Rows> query_or_explain(LostReply lost, const char* statement,
                                             const char* explain, Args... args) {
    pg::Params params{pg::param(std::move(args))...};
    auto run = [statement, explain, params](pg::AsyncLink& link) {
      return pg::exec_or_explain(link, statement, params, explain, params);
    };
    co_return co_await on_pool(lost, std::move(run));
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
  // The pool: non-blocking connections used on the caller's executor.
  std::shared_ptr<pg::AsyncPool> async_pool = std::make_shared<pg::AsyncPool>(options.pool_size());
  // One connection thread with a blocking connection of its own: it migrates the schema, opens
  // the pool's connections, and serves the rare calls (migrate, check_server) that use libpqxx.
  std::shared_ptr<pg::JobQueue> pool_queue = std::make_shared<pg::JobQueue>();
  std::unique_ptr<pg::Worker> admin;

  mutable std::mutex mu;
  std::vector<std::shared_ptr<SessionConn>> all_sessions;
  const std::shared_ptr<IdleSessions> idle = std::make_shared<IdleSessions>();
  std::unordered_map<SessionId, std::shared_ptr<SessionConn>> open;
  std::atomic<SessionId> next_session{0};
  std::atomic<std::uint64_t> next_seq{0};
  // Resources storage confirmed: sessions over them skip the existence check.
  detail::KnownResources known{options.known_resources()};
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

milliseconds PostgresBackend::idempotency_retention() const {
  return impl_->options.idempotency_retention();
}

std::size_t PostgresBackend::open_sessions() const {
  std::lock_guard guard(impl_->mu);
  return impl_->open.size();
}

// ---- leases and fencing -----------------------------------------------------------------------

asio::awaitable<Lease> PostgresBackend::acquire_lease(std::string resource, std::string owner,
                                                      milliseconds ttl) {
  auto impl = impl_;
  detail::validate_name("resource name", resource);
  detail::validate_name("owner", owner);
  detail::validate_ttl(ttl);
  const auto rows = co_await impl->query_or_explain(
      LostReply::write(), pg::stmt::acquire_taken.name, pg::stmt::acquire.name, resource, owner,
      static_cast<long long>(ttl.count()));
  co_return detail::lease_or_raise(pg::decode_acquire(rows, resource), owner);
}

asio::awaitable<Lease> PostgresBackend::renew_lease(Lease lease, std::optional<milliseconds> ttl) {
  auto impl = impl_;
  detail::validate_lease(lease);
  const milliseconds t = ttl.value_or(lease.ttl);
  detail::validate_ttl(t);
  const auto rows = co_await impl->query_or_explain(
      LostReply::write(), pg::stmt::renew_renewed.name, pg::stmt::renew.name, lease.resource,
      lease.owner, static_cast<long long>(lease.token), static_cast<long long>(t.count()));
  co_return detail::renewed_or_raise(pg::decode_renew(rows, lease), lease);
}

asio::awaitable<bool> PostgresBackend::release_lease(Lease lease) {
  auto impl = impl_;
  detail::validate_lease(lease);
  const auto rows = co_await impl->query(LostReply::write(), pg::stmt::release.name, lease.resource,
                                         lease.owner, static_cast<long long>(lease.token));
  co_return pg::decode_release(rows);
}

asio::awaitable<Token> PostgresBackend::current_fence(std::string resource) {
  auto impl = impl_;
  detail::validate_name("resource name", resource);
  const auto rows = co_await impl->query(LostReply::read(), pg::stmt::current_fence.name, resource);
  co_return pg::decode_fence(rows);
}

// ---- inspection and revoke ---------------------------------------------------------------------

asio::awaitable<std::vector<LeaseInfo>> PostgresBackend::list_leases(
    std::optional<std::string> glob) {
  auto impl = impl_;
  if (glob) detail::validate_glob(*glob);
  const std::string prefix = glob ? detail::glob_literal_prefix(*glob) : std::string();
  const auto rows = co_await impl->query(LostReply::read(), pg::stmt::live_leases.name, prefix,
                                         std::optional<std::string>());
  co_return pg::decode_live_leases(rows, glob);
}

asio::awaitable<std::optional<LeaseInfo>> PostgresBackend::lease_holder(std::string resource) {
  auto impl = impl_;
  detail::validate_name("resource name", resource);
  const auto rows = co_await impl->query(LostReply::read(), pg::stmt::live_leases.name, resource,
                                         std::optional<std::string>(resource));
  auto leases = pg::decode_live_leases(rows, std::nullopt);
  if (leases.size() > 1) pg::unexpected("statepact_live_leases");
  co_return leases.empty() ? std::optional<LeaseInfo>() : std::optional<LeaseInfo>(leases.front());
}

asio::awaitable<std::vector<ResourceInfo>> PostgresBackend::list_resources(
    std::optional<std::string> glob) {
  auto impl = impl_;
  if (glob) detail::validate_glob(*glob);
  const std::string prefix = glob ? detail::glob_literal_prefix(*glob) : std::string();
  const auto rows = co_await impl->query(LostReply::read(), pg::stmt::list_resources.name, prefix);
  co_return pg::decode_list_resources(rows, glob);
}

asio::awaitable<std::optional<RevokedLease>> PostgresBackend::revoke_lease(std::string resource) {
  auto impl = impl_;
  detail::validate_name("resource name", resource);
  const auto rows = co_await impl->query(LostReply::write(), pg::stmt::revoke.name, resource);
  co_return pg::decode_revoke(rows, resource);
}

// ---- administration ---------------------------------------------------------------------------

int PostgresBackend::latest_schema_version() {
  return pg::latest_version();
}

asio::awaitable<int> PostgresBackend::migrate() {
  auto impl = impl_;
  auto job = [](pg::Link& link) {
    auto r = pg::autocommit(link, LostReply::read(), [&](pqxx::nontransaction& n) {
      return n.exec("SELECT coalesce(max(version), 0) FROM statepact_schema_version");
    });
    return r.at(0)[0].as<int>();
  };
  co_return co_await pg::call<int>(*impl->pool_queue, impl->deadline(), std::move(job));
}

asio::awaitable<PostgresServerCheck> PostgresBackend::check_server() {
  auto impl = impl_;
  auto job = [](pg::Link& link) {
    auto r = pg::autocommit(link, LostReply::read(), [&](pqxx::nontransaction& n) {
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
  co_return co_await pg::call<PostgresServerCheck>(*impl->pool_queue, impl->deadline(),
                                                   std::move(job));
}

// ---- state ------------------------------------------------------------------------------------

asio::awaitable<bool> PostgresBackend::register_resource(std::string name, Value initial_state,
                                                         ResourcePolicy policy) {
  auto impl = impl_;
  detail::validate_initial_state(name, initial_state);
  const auto rows = co_await impl->query(LostReply::write(), pg::stmt::register_resource.name, name,
                                         pg::jsonb_text(initial_state), policy.fence_required);
  const bool created = pg::decode_register(rows);
  impl->known.remember(name);
  co_return created;
}

asio::awaitable<void> PostgresBackend::set_resource_policy(std::string name,
                                                           ResourcePolicy policy) {
  auto impl = impl_;
  detail::validate_name("resource name", name);
  const auto rows = co_await impl->query(LostReply::write(), pg::stmt::set_policy.name, name,
                                         policy.fence_required);
  detail::found_or_raise(pg::decode_set_policy(rows, name));
}

asio::awaitable<ResourcePolicy> PostgresBackend::resource_policy(std::string name) {
  auto impl = impl_;
  detail::validate_name("resource name", name);
  const auto rows = co_await impl->query(LostReply::read(), pg::stmt::policy.name, name);
  co_return detail::found_or_raise(pg::decode_policy(rows, name));
}

asio::awaitable<Entry> PostgresBackend::read(std::string resource, std::string key) {
  auto impl = impl_;
  detail::validate_name("resource name", resource);
  detail::validate_name("key", key);
  const auto rows = co_await impl->query(LostReply::read(), pg::stmt::read.name, resource, key);
  co_return detail::found_or_raise(pg::decode_read(rows, resource));
}

asio::awaitable<std::vector<ResourceSnapshot>> PostgresBackend::snapshot(
    std::vector<std::string> resources) {
  auto impl = impl_;
  for (const auto& r : resources) detail::validate_name("resource name", r);
  const auto rows =
      co_await impl->query(LostReply::read(), pg::stmt::snapshot.name, names_json(resources));
  co_return detail::found_or_raise(pg::decode_snapshot(rows, resources));
}

// ---- sessions ---------------------------------------------------------------------------------

asio::awaitable<SessionId> PostgresBackend::begin_session(std::vector<std::string> resources,
                                                          Isolation isolation) {
  auto impl = impl_;
  for (const auto& r : resources) detail::validate_name("resource name", r);
  const bool known = impl->known.all_known(resources);
  const std::string names = known ? std::string() : names_json(resources);
  auto check = [names, known](pqxx::transaction_base& t) {
    if (known) return;
    detail::found_or_raise(
        pg::decode_missing(rows_of(t.exec_prepared(pg::stmt::missing.name, names))));
  };
  if (isolation != Isolation::pessimistic) {
    if (known) co_return ++impl->next_session;
    const auto rows = co_await impl->query(LostReply::read(), pg::stmt::missing.name, names);
    detail::found_or_raise(pg::decode_missing(rows));
    impl->known.remember(resources);
    co_return ++impl->next_session;
  }
  // Pessimistic: a connection of its own with a real transaction, held until commit or end.
  auto sc = impl->take_idle();
  auto job = [check](pg::Link& link) {
    pg::autocommit(link, LostReply::in_transaction(), [&](pqxx::nontransaction& n) { check(n); });
    pg::roll_back(link);  // nothing should be open; never start a second transaction on it
    try {
      link.tx = std::make_unique<pqxx::work>(link.current());
    } catch (...) {
      pg::rethrow_mapped(link, LostReply::in_transaction());
    }
    return 0;
  };
  // On failure the connection goes back through its own thread, after the begin job: if that
  // job still runs (the deadline passed first), the transaction it opens is rolled back.
  std::exception_ptr failed;
  try {
    co_await pg::call<int>(*sc->queue, impl->deadline(), std::move(job));
  } catch (...) {
    failed = std::current_exception();
  }
  if (failed) {
    impl->release(sc);
    std::rethrow_exception(failed);
  }
  impl->known.remember(resources);
  const SessionId id = ++impl->next_session;
  {
    std::lock_guard guard(impl->mu);
    impl->open[id] = sc;
  }
  co_return id;
}

asio::awaitable<Entry> PostgresBackend::lock(SessionId session, std::string resource,
                                             std::string key, LockMode mode, milliseconds timeout) {
  auto impl = impl_;
  detail::validate_name("resource name", resource);
  detail::validate_name("key", key);
  if (timeout <= milliseconds::zero()) throw InvalidArgumentError("lock timeout must be positive");
  auto sc = impl->find_open(session);
  if (!sc)
    throw UsageError(
        fmt::format("lock() on session {}, which is not an open pessimistic session", session));
  const std::uint64_t seq = ++impl->next_seq;
  const long long deadlock_ms =
      impl->options.deadlock_timeout() ? impl->options.deadlock_timeout()->count() : -1;
  auto job = [resource, key, mode, timeout, deadlock_ms, seq, cancel = sc->cancel](pg::Link& link) {
    // A timeout or a refused deadlock is an answer, not a failure: the function catches them in a
    // subtransaction, so the session and the locks it holds survive.
    const pg::Rows rows = pg::in_transaction(link, [&](pqxx::work& tx) {
      pg::ArmedCancel armed(*cancel, link.current(), seq);
      return rows_of(tx.exec_prepared(pg::stmt::lock.name, resource, key,
                                      mode == LockMode::exclusive,
                                      static_cast<long long>(timeout.count()), deadlock_ms));
    });
    detail::LockAnswer answer = pg::decode_lock(rows);
    if (answer.verdict == detail::Verdict::cancelled) {
      if (cancel->cancelled(seq))
        throw std::system_error(make_error_code(asio::error::operation_aborted),
                                "lock wait cancelled");
      answer.verdict = detail::Verdict::timeout;  // cancelled by statement_timeout
    }
    return detail::entry_or_raise(std::move(answer), resource, key, mode, timeout);
  };
  // The wait itself may take its whole timeout; the deadline only catches a server gone silent.
  pg::Deadline deadline = impl->deadline();
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

namespace {

// A commit's call: the one-resource fast path when the request allows it (a single write tries
// its one statement first), else the general one.
struct CommitCall {
  struct Step {
    const char* statement = nullptr;
    pg::Params params;
  };
  std::optional<Step> first;  // answers only when it wrote
  Step then;                  // when there is no first step, or it answered no row

  CommitCall(const CommitRequest& req, milliseconds retention) {
    const auto one = pg::encode_commit_one(req);
    if (!one) {
      then = Step{pg::stmt::commit.name, {pg::param(pg::encode_commit(req, retention))}};
      return;
    }
    const auto token = static_cast<long long>(one->token);
    if (const auto& w = one->only_write)
      first = Step{
          (token ? pg::stmt::commit_fenced_write : pg::stmt::commit_write).name,
          {pg::param(one->resource), pg::param(token), pg::param(w->key), pg::param(w->value)}};
    then = Step{pg::stmt::commit_one.name,
                {pg::param(one->resource), pg::param(token), pg::param(one->checks),
                 pg::param(one->writes)}};
  }

  // In a pessimistic session's transaction.
  pqxx::result exec(pqxx::transaction_base& t) const {
    if (first) {
      pqxx::result r =
          t.exec_prepared(first->statement, pqxx::prepare::make_dynamic_params(first->params));
      if (!r.empty()) return r;
    }
    return t.exec_prepared(then.statement, pqxx::prepare::make_dynamic_params(then.params));
  }

  // On a pool connection, in autocommit: each statement is its own transaction, and the first
  // one either wrote everything or nothing.
  asio::awaitable<pg::Answer> exec(pg::AsyncLink& link) const {
    if (first)
      return pg::exec_or_explain(link, first->statement, first->params, then.statement,
                                 then.params);
    return link.exec(then.statement, then.params);
  }
};

// A commit's answer; one that cannot be read leaves the commit's outcome unknown.
detail::CommitAnswer commit_answer(const pg::Rows& rows, bool has_key) {
  try {
    return pg::decode_commit(
        pg::text_at(pg::only_row(rows, "statepact_commit"), 0, "statepact_commit"));
  } catch (const Error& e) {
    throw CommitUnknownError(
        fmt::format("unexpected reply from PostgreSQL after the commit was sent; it may or may "
                    "not have been applied: {}",
                    e.what()),
        has_key);
  }
}

}  // namespace

asio::awaitable<CommitResult> PostgresBackend::commit(CommitRequest req) {
  auto impl = impl_;
  detail::validate_commit(req);
  CommitCall body(req, impl->options.idempotency_retention());
  const bool has_key = req.idempotency_key.has_value();
  auto sc = impl->take_open(req.session);
  if (!sc) {
    auto run = [body = std::move(body)](pg::AsyncLink& link) { return body.exec(link); };
    const auto rows = co_await impl->on_pool(LostReply::commit(has_key), std::move(run));
    co_return detail::result_or_raise(commit_answer(rows, has_key), req);
  }
  // A pessimistic session: the commit function runs in the session's transaction, then COMMIT
  // releases its locks. Until COMMIT is sent a lost connection means the server rolled back.
  auto job = [body = std::move(body), req = std::move(req), has_key, idle = impl->idle,
              sc](pg::Link& link) {
    // However the job ends, the connection goes back with no transaction open.
    struct GiveBack {
      std::shared_ptr<Impl::IdleSessions> idle;
      std::shared_ptr<Impl::SessionConn> sc;
      pg::Link& link;
      ~GiveBack() {
        pg::roll_back(link);
        idle->put(sc);
      }
    } give_back{idle, sc, link};
    // Until COMMIT is sent, every failure (a refusal included) means nothing was applied.
    CommitResult result = pg::in_transaction(link, [&](pqxx::work& tx) {
      const auto answer = body.exec(tx);
      return detail::result_or_raise(pg::decode_commit(answer.at(0)[0].c_str()), req);
    });
    try {
      link.tx->commit();
      link.tx.reset();
    } catch (...) {
      // An error reply to COMMIT means it rolled back (mapped as such); a lost connection or
      // libpqxx's in-doubt error leave the outcome unknown.
      pg::roll_back(link);
      pg::rethrow_mapped(link, LostReply::commit(has_key));
    }
    return result;
  };
  // The deadline may pass while the job waits behind a stuck statement of the session: then it
  // never runs, and the session's transaction is rolled back and its connection handed back.
  auto skipped = [idle = impl->idle, sc](pg::Link& link) {
    pg::roll_back(link);
    idle->put(sc);
  };
  co_return co_await pg::call<CommitResult>(*sc->queue, impl->deadline(LostReply::commit(has_key)),
                                            std::move(job), nullptr, 0, std::move(skipped));
}

}  // namespace statepact
