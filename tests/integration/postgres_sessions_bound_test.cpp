// Pessimistic sessions are bounded: a cap on the connections and threads they hold, and a server
// timeout that frees the row locks of a holder that went quiet inside its transaction.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <statepact/postgres.hpp>
#include <statepact/statepact.hpp>

#include "../support/expect.hpp"
#include "../support/run.hpp"
#include "../support/sleep.hpp"
#include "postgres_admin.hpp"

namespace sp = statepact;
using namespace std::chrono_literals;

TEST_CASE("pessimistic sessions past max_pessimistic_sessions are refused at once",
          "[postgres][integration]") {
  CHECK_THROWS_AS(sp::PostgresOptions().max_pessimistic_sessions(0), sp::InvalidArgumentError);
  CHECK(sp::PostgresOptions().max_pessimistic_sessions() == 64);
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::PostgresBackend b(ex, sp::test::postgres_test_url(),
                          sp::PostgresOptions().pool_size(1).max_pessimistic_sessions(2));
    const auto r = sp::test::PostgresFixture(ex).resource("capped");
    co_await b.register_resource(r);
    std::vector<std::string> names(1, r);
    auto s1 = co_await b.begin_session(names, sp::Isolation::pessimistic);
    auto s2 = co_await b.begin_session(names, sp::Isolation::pessimistic);
    auto refused = co_await sp::test::thrown<sp::BackendUnavailableError>(
        [&] { return b.begin_session(names, sp::Isolation::pessimistic); });
    REQUIRE(refused);
    CHECK(refused->retryable());
    CHECK(std::string(refused->what()).find("max_pessimistic_sessions") != std::string::npos);
    CHECK(b.open_sessions() == 2);
    // Optimistic sessions hold nothing and are not counted.
    co_await b.begin_session(names, sp::Isolation::optimistic);
    // Once one ends (its rollback runs on its own thread), its connection serves the next.
    b.end_session(s1);
    std::optional<sp::SessionId> s3;
    for (int i = 0; i < 200 && !s3; ++i) {
      try {
        s3 = co_await b.begin_session(names, sp::Isolation::pessimistic);
      } catch (const sp::BackendUnavailableError&) {
      }
      if (!s3) co_await sp::test::sleep_for(5ms);
    }
    CHECK(s3);
    b.end_session(s2);
    if (s3) b.end_session(*s3);
  });
}

TEST_CASE("a holder idle in its transaction past the timeout loses its locks",
          "[postgres][integration]") {
  CHECK_THROWS_AS(sp::PostgresOptions().idle_in_transaction_timeout(0ms), sp::InvalidArgumentError);
  CHECK_THROWS_AS(sp::PostgresOptions().idle_in_transaction_timeout(std::chrono::hours(2)),
                  sp::InvalidArgumentError);
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::PostgresBackend quiet(ex, sp::test::postgres_test_url(),
                              sp::PostgresOptions().idle_in_transaction_timeout(300ms));
    sp::PostgresBackend other(ex, sp::test::postgres_test_url());
    const auto r = sp::test::PostgresFixture(ex).resource("idle-holder");
    co_await quiet.register_resource(r);
    std::vector<std::string> names(1, r);
    auto s = co_await quiet.begin_session(names, sp::Isolation::pessimistic);
    co_await quiet.lock(s, r, "k", sp::LockMode::exclusive, 1s);
    // The holder goes quiet; the server ends its session and frees the lock.
    co_await sp::test::sleep_for(800ms);
    auto t = co_await other.begin_session(names, sp::Isolation::pessimistic);
    auto got = co_await other.lock(t, r, "k", sp::LockMode::exclusive, 2s);
    CHECK_FALSE(got.value);
    other.end_session(t);
    // The quiet holder's commit fails cleanly and applies nothing.
    sp::CommitRequest req;
    req.agent_id = "holder";
    req.session = s;
    req.resources = names;
    req.writes.push_back(sp::WriteOp{r, "k", sp::Value(1)});
    auto lost =
        co_await sp::test::thrown<sp::BackendUnavailableError>([&] { return quiet.commit(req); });
    REQUIRE(lost);
    auto e = co_await other.read(r, "k");
    CHECK_FALSE(e.value);
    // The backend carries on with a new connection.
    auto s2 = co_await quiet.begin_session(names, sp::Isolation::pessimistic);
    co_await quiet.lock(s2, r, "k", sp::LockMode::exclusive, 1s);
    req.session = s2;
    auto done = co_await quiet.commit(req);
    CHECK(done.versions.at(r) == 1);
  });
}

TEST_CASE("a backend destroyed with a pessimistic session open rolls it back",
          "[postgres][integration]") {
  const auto r = sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<std::string> {
    sp::PostgresBackend b(ex, sp::test::postgres_test_url());
    const auto name = sp::test::PostgresFixture(ex).resource("left-open");
    co_await b.register_resource(name);
    std::vector<std::string> names(1, name);
    auto s = co_await b.begin_session(names, sp::Isolation::pessimistic);
    co_await b.lock(s, name, "k", sp::LockMode::exclusive, 1s);
    co_return name;  // the session is never ended
  });
  sp::test::run([r](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::PostgresBackend b(ex, sp::test::postgres_test_url());
    std::vector<std::string> names(1, r);
    auto s = co_await b.begin_session(names, sp::Isolation::pessimistic);
    auto got = co_await b.lock(s, r, "k", sp::LockMode::exclusive, 2s);
    CHECK_FALSE(got.value);
    b.end_session(s);
  });
}
