// Beginning a session checks that its resources exist once per name and client: resources are
// never removed, and the commit checks them again, so a known name costs no round trip.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <statepact/postgres.hpp>
#include <statepact/statepact.hpp>

#include "../support/expect.hpp"
#include "../support/run.hpp"
#include "postgres_admin.hpp"

namespace sp = statepact;

namespace {

// Whether a connection of `app` last ran the existence check of a session begin.
bool checked_existence(sp::test::PostgresAdmin& admin, const std::string& app) {
  for (const auto& q : admin.last_queries(app))
    if (q.find("statepact_missing") != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("a session over resources this client saw registered begins without a round trip",
          "[postgres][integration]") {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    const auto app = sp::test::unique_application_name("it-known");
    sp::PostgresBackend b(ex, sp::test::postgres_test_url(),
                          sp::PostgresOptions().application_name(app).pool_size(1));
    sp::PostgresBackend other(ex, sp::test::postgres_test_url());
    sp::test::PostgresFixture fx(ex);
    const auto mine = fx.resource("known-here"), theirs = fx.resource("known-elsewhere");
    co_await b.register_resource(mine);
    co_await other.register_resource(theirs);
    sp::test::PostgresAdmin admin;
    auto checked = [&] { return checked_existence(admin, app); };
    REQUIRE_FALSE(checked());
    std::vector<std::string> known(1, mine);
    auto id1 = co_await b.begin_session(known, sp::Isolation::serializable);
    b.end_session(id1);
    CHECK_FALSE(checked());
    // A name only another client registered is checked once, then known.
    std::vector<std::string> both{mine, theirs};
    auto id2 = co_await b.begin_session(both, sp::Isolation::optimistic);
    b.end_session(id2);
    CHECK(checked());
    auto entry = co_await b.read(mine, "k");  // the connection runs something else
    CHECK_FALSE(entry.value);
    auto id3 = co_await b.begin_session(both, sp::Isolation::snapshot);
    b.end_session(id3);
    CHECK_FALSE(checked());
    // An unregistered name is still refused at begin, and is not remembered.
    std::vector<std::string> missing{mine, fx.resource("never-registered")};
    for (int i = 0; i < 2; ++i) {
      auto refused = co_await sp::test::thrown<sp::ResourceNotFoundError>(
          [&] { return b.begin_session(missing, sp::Isolation::optimistic); });
      CHECK(refused);
    }
  });
}

TEST_CASE("a PostgreSQL backend told to remember no resources checks them at every begin",
          "[postgres][integration]") {
  CHECK(sp::PostgresOptions().known_resources() == 65536);
  CHECK(sp::PostgresOptions().known_resources(0).known_resources() == 0);
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    const auto app = sp::test::unique_application_name("it-unknown-all");
    sp::PostgresBackend b(
        ex, sp::test::postgres_test_url(),
        sp::PostgresOptions().application_name(app).pool_size(1).known_resources(0));
    const auto mine = sp::test::PostgresFixture(ex).resource("never-remembered");
    co_await b.register_resource(mine);
    sp::test::PostgresAdmin admin;
    auto checked = [&] { return checked_existence(admin, app); };
    REQUIRE_FALSE(checked());
    std::vector<std::string> names(1, mine);
    auto id = co_await b.begin_session(names, sp::Isolation::optimistic);
    b.end_session(id);
    CHECK(checked());
  });
}
