// Connection loss: connections ended by pg_terminate_backend are replaced before the next
// statement is sent; a commit whose connection dies after it was sent reports CommitUnknownError,
// and with an idempotency key re-sending it is safe.
#include <chrono>
#include <optional>
#include <thread>

#include <catch2/catch.hpp>

#include <statepact/postgres.hpp>
#include <statepact/statepact.hpp>

#include "../support/expect.hpp"
#include "../support/offline.hpp"
#include "../support/ports.hpp"
#include "../support/run.hpp"
#include "../support/sleep.hpp"
#include "postgres_admin.hpp"

namespace sp = statepact;

namespace {

sp::PostgresOptions named(const std::string& app) {
  return sp::PostgresOptions().application_name(app).pool_size(2);
}

}  // namespace

TEST_CASE("terminated connections are replaced without failing the next operation",
          "[postgres][integration]") {
  const auto app = sp::test::unique_application_name("it-terminate");
  sp::test::run([app](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::test::PostgresAdmin admin;
    sp::PostgresBackend b(ex, sp::test::postgres_test_url(), named(app));
    sp::Manager<sp::PostgresBackend> m(b);
    const auto r = sp::test::PostgresFixture(ex).resource("terminated");
    auto lease = co_await m.lease(r, "worker-a", 30s);
    for (int round = 0; round < 3; ++round) {
      auto ended = admin.terminate(app);
      CHECK(ended >= 1);
      co_await sp::test::eventually([&] { return admin.connections(app) == 0; }, 10s,
                                    "the terminated connections to go");
      // Every kind of operation still works on the first try.
      lease = co_await b.renew_lease(lease, std::nullopt);
      auto s = co_await m.session(sp::SessionOptions("worker-a").resource(r).fence(lease.token));
      co_await s.write("round", round);
      auto res = co_await s.commit();
      CHECK(res.versions.at(r) == static_cast<sp::Version>(round + 1));
      auto e = co_await b.read(r, "round");
      CHECK(e.value == sp::Value(round));
    }
    // A pessimistic session whose connection is ended loses its transaction: its commit fails
    // as unavailable (nothing applied) and a new session works.
    auto s = co_await m.session(
        sp::SessionOptions("worker-a").resource(r).isolation(sp::Isolation::pessimistic));
    co_await s.write("round", 99);
    admin.terminate(app);
    co_await sp::test::eventually([&] { return admin.connections(app) == 0; }, 10s,
                                  "the terminated connections to go");
    auto lost = co_await sp::test::thrown<sp::BackendUnavailableError>([&] { return s.commit(); });
    REQUIRE(lost);
    CHECK(lost->retryable());
    auto e = co_await b.read(r, "round");
    CHECK(e.value == sp::Value(2));
    auto again = co_await m.session(
        sp::SessionOptions("worker-a").resource(r).isolation(sp::Isolation::pessimistic));
    co_await again.write("round", 100);
    co_await again.commit();
    auto e2 = co_await b.read(r, "round");
    CHECK(e2.value == sp::Value(100));
  });
}

TEST_CASE(
    "a commit cut off after it was sent is unknown, and with an idempotency key retried safely",
    "[postgres][integration]") {
  const auto app = sp::test::unique_application_name("it-unknown");
  sp::test::run([app](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::test::PostgresAdmin admin, holder;
    sp::PostgresBackend b(ex, sp::test::postgres_test_url(), named(app));
    sp::Manager<sp::PostgresBackend> m(b);
    const auto r = sp::test::PostgresFixture(ex).resource("unknown");
    co_await m.register_resource(r, sp::Value::parse(R"({"stock": 10})"));
    for (bool with_key : {false, true}) {
      // The operator holds the resource's row lock, so the commit blocks inside the server;
      // then the commit's connection is ended.
      pqxx::work hold(holder.connection());
      hold.exec_params("SELECT 1 FROM statepact_resources WHERE name = $1 FOR UPDATE", r);
      auto opts = sp::SessionOptions("shop").resource(r);
      if (with_key) opts.idempotency_key(r + "#order");
      auto s = co_await m.session(opts);
      co_await s.write("stock", 9);
      std::thread killer([&admin, app] {
        if (admin.wait_for_lock_waiter(app, std::chrono::seconds(10))) admin.terminate(app);
      });
      auto unknown = co_await sp::test::thrown<sp::CommitUnknownError>([&] { return s.commit(); });
      killer.join();
      hold.abort();
      REQUIRE(unknown);
      CHECK(unknown->has_idempotency_key() == with_key);
      CHECK(unknown->retryable() == with_key);
      if (with_key) {
        // Re-sending the same commit is safe: it applies once, and a further retry replays.
        auto retry = co_await m.session(opts);
        co_await retry.write("stock", 9);
        auto first = co_await retry.commit();
        auto replay = co_await m.session(opts);
        co_await replay.write("stock", 9);
        auto second = co_await replay.commit();
        CHECK(second.replayed);
        CHECK(second.versions == first.versions);
        auto e = co_await b.read(r, "stock");
        CHECK(e.value == sp::Value(9));
        CHECK(e.version == 1);
      } else {
        auto e = co_await b.read(r, "stock");
        CHECK(e.value == sp::Value(10));  // the server rolled it back when the connection died
      }
    }
  });
}

TEST_CASE("bad input is InvalidArgumentError even when the server is unreachable",
          "[postgres][integration][validation]") {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    const int closed = sp::test::unused_loopback_port();  // nothing listens there
    sp::PostgresBackend b(ex, fmt::format("postgresql://postgres@127.0.0.1:{}/none", closed),
                          sp::PostgresOptions().connect_timeout(2s));
    // The server really is out of reach: a valid call fails as unavailable.
    auto unavailable = co_await sp::test::thrown<sp::BackendUnavailableError>(
        [&] { return b.current_fence("offline-job"); });
    CHECK(unavailable);
    // Bad input never gets that far.
    auto wrong = co_await sp::test::bad_input_offline(b);
    CHECK(wrong == 0);
  });
}
