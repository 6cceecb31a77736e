// Beginning a session checks that its resources exist once per name and client: resources are
// never removed, and the commit checks them again, so a known name costs no round trip.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <statepact/redis.hpp>
#include <statepact/statepact.hpp>

#include "../support/expect.hpp"
#include "../support/run.hpp"
#include "../support/sleep.hpp"
#include "redis_admin.hpp"

namespace sp = statepact;
using namespace std::chrono_literals;

TEST_CASE("a session over resources this client saw registered begins without a round trip",
          "[redis][integration]") {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    const std::string client = "statepact-it-" + sp::test::random_hex();
    sp::RedisBackend b(ex, sp::test::redis_test_url(), sp::RedisOptions().client_name(client));
    sp::RedisBackend other(ex, sp::test::redis_test_url());
    const std::string run = sp::test::random_hex();
    const std::string mine = "known-here-" + run, theirs = "known-elsewhere-" + run;
    co_await b.register_resource(mine);
    co_await other.register_resource(theirs);
    sp::test::RedisAdmin admin;
    // CLIENT LIST counts a connection's idle time in whole seconds: past one second of quiet, a
    // begin that sent anything would show as 0 again.
    auto quiet = [&]() -> asio::awaitable<bool> {
      co_await sp::test::sleep_for(1100ms);
      co_return admin.client_field(client, "idle") != "0";
    };
    REQUIRE(co_await quiet());
    std::vector<std::string> known(1, mine);
    auto id1 = co_await b.begin_session(known, sp::Isolation::serializable);
    b.end_session(id1);
    CHECK(admin.client_field(client, "idle") != "0");
    // A name only another client registered is checked once, then known.
    std::vector<std::string> both{mine, theirs};
    auto id2 = co_await b.begin_session(both, sp::Isolation::optimistic);
    b.end_session(id2);
    CHECK(admin.client_field(client, "idle") == "0");
    REQUIRE(co_await quiet());
    auto id3 = co_await b.begin_session(both, sp::Isolation::snapshot);
    b.end_session(id3);
    CHECK(admin.client_field(client, "idle") != "0");
    // An unregistered name is still refused at begin, and is not remembered.
    std::vector<std::string> missing{mine, "never-registered-" + run};
    for (int i = 0; i < 2; ++i) {
      auto refused = co_await sp::test::thrown<sp::ResourceNotFoundError>(
          [&] { return b.begin_session(missing, sp::Isolation::optimistic); });
      CHECK(refused);
    }
  });
}

TEST_CASE("a Redis backend told to remember no resources checks them at every begin",
          "[redis][integration]") {
  CHECK(sp::RedisOptions().known_resources() == 65536);
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    const std::string client = "statepact-it-" + sp::test::random_hex();
    sp::RedisBackend b(ex, sp::test::redis_test_url(),
                       sp::RedisOptions().client_name(client).known_resources(0));
    const std::string mine = "never-remembered-" + sp::test::random_hex();
    co_await b.register_resource(mine);
    sp::test::RedisAdmin admin;
    co_await sp::test::sleep_for(1100ms);
    REQUIRE(admin.client_field(client, "idle") != "0");
    std::vector<std::string> names(1, mine);
    auto id = co_await b.begin_session(names, sp::Isolation::optimistic);
    b.end_session(id);
    CHECK(admin.client_field(client, "idle") == "0");
  });
}
