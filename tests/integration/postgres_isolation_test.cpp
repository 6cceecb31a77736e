// The server functions assume READ COMMITTED (a commit's checks see every commit that finished
// before its row locks were granted). A database whose default is SERIALIZABLE must not change
// that: concurrent commits, leases and pessimistic sessions behave as everywhere else.
#include <string>
#include <vector>

#include <asio/co_spawn.hpp>
#include <catch2/catch.hpp>
#include <pqxx/pqxx>

#include <statepact/postgres.hpp>
#include <statepact/statepact.hpp>

#include "../support/run.hpp"
#include "postgres_admin.hpp"

namespace sp = statepact;
using namespace std::chrono_literals;

namespace {

asio::awaitable<void> write_key(sp::PostgresBackend& b, std::string r, int i) {
  sp::CommitRequest req;
  req.agent_id = "agent";
  req.resources = {r};
  req.writes.push_back(sp::WriteOp{r, "k" + std::to_string(i), sp::Value(i)});
  co_await b.commit(req);
}

}  // namespace

TEST_CASE("a database defaulting to serializable still behaves as read committed",
          "[postgres][integration]") {
  const std::string db = "statepact_iso_" + sp::test::run_suffix();
  sp::test::PostgresAdmin admin;
  {
    pqxx::nontransaction n(admin.connection());
    n.exec("CREATE DATABASE " + n.quote_name(db));
    n.exec("ALTER DATABASE " + n.quote_name(db) +
           " SET default_transaction_isolation = 'serializable'");
  }
  struct Drop {
    sp::test::PostgresAdmin& admin;
    std::string db;
    ~Drop() {
      pqxx::nontransaction n(admin.connection());
      n.exec("DROP DATABASE IF EXISTS " + n.quote_name(db) + " WITH (FORCE)");
    }
  } drop{admin, db};
  const std::string base = sp::test::postgres_test_url();
  const std::string url = base.substr(0, base.rfind('/') + 1) + db;

  sp::test::run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::PostgresBackend b(ex, url, sp::PostgresOptions().pool_size(4));
    sp::Manager<sp::PostgresBackend> m(b);
    co_await b.register_resource("r");
    // Concurrent commits to one resource wait for each other's row lock; under SERIALIZABLE
    // the later ones would fail to serialize instead.
    constexpr int n = 24;
    std::vector<std::shared_ptr<bool>> done;
    for (int i = 0; i < n; ++i) {
      auto flag = std::make_shared<bool>(false);
      done.push_back(flag);
      asio::co_spawn(ex, write_key(b, "r", i), [flag](std::exception_ptr e) {
        if (!e) *flag = true;
      });
    }
    asio::steady_timer t(ex);
    for (int waited = 0; waited < 500; ++waited) {
      int finished = 0;
      for (auto& f : done) finished += *f;
      if (finished == n) break;
      t.expires_after(20ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    int ok = 0;
    for (auto& f : done) ok += *f;
    CHECK(ok == n);
    std::vector<std::string> names(1, "r");
    auto snap = co_await b.snapshot(names);
    CHECK(snap.at(0).version == static_cast<sp::Version>(n));

    // Leases and a pessimistic session work as usual.
    auto lease = co_await b.acquire_lease("r", "worker-a", 30s);
    auto s = co_await m.session(sp::SessionOptions("worker-a")
                                    .resource("r")
                                    .fence(lease)
                                    .isolation(sp::Isolation::pessimistic));
    auto e = co_await s.read("k0");
    CHECK(e == sp::Value(0));
    co_await s.write("k0", 100);
    auto res = co_await s.commit();
    CHECK(res.versions.at("r") == static_cast<sp::Version>(n + 1));
  });
}
