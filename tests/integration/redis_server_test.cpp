// What the backend demands of the server it talks to: a server that may evict keys is refused
// before anything is written.
#include <string>

#include <catch2/catch.hpp>

#include <statepact/redis.hpp>
#include <statepact/statepact.hpp>

#include "../support/run.hpp"
#include "redis_admin.hpp"

namespace sp = statepact;
using namespace std::chrono_literals;

TEST_CASE("a server that may evict keys is refused before anything is written",
          "[redis][integration]") {
  sp::test::PrivateRedis server("--maxmemory 64mb --maxmemory-policy allkeys-lru");
  sp::test::RedisAdmin admin(server.port());
  std::string message;
  bool retryable = true;
  sp::test::run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::RedisBackend b(ex, server.url());
    try {
      co_await b.register_resource("job");
    } catch (const sp::InvalidArgumentError& e) {
      message = e.what();
      retryable = e.retryable();
    }
  });
  CHECK_THAT(message, Catch::Contains("maxmemory-policy 'allkeys-lru'") &&
                          Catch::Contains("CONFIG SET maxmemory-policy noeviction"));
  CHECK_FALSE(retryable);
  CHECK(admin.dbsize() == 0);

  // Each call checks again (a new connection each time), and still writes nothing.
  bool refused_again = false;
  sp::test::run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::RedisBackend b(ex, server.url());
    try {
      co_await b.acquire_lease("job", "worker", 30s);
    } catch (const sp::InvalidArgumentError&) {
      refused_again = true;
    }
  });
  CHECK(refused_again);
  CHECK(admin.dbsize() == 0);

  // The documented opt-out.
  bool created = false;
  sp::test::run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::RedisBackend b(ex, server.url(), sp::RedisOptions().allow_eviction_unsafe(true));
    created = co_await b.register_resource("job");
  });
  CHECK(created);
  CHECK(admin.dbsize() > 0);
}
