// What the backend demands of the server it talks to: a server that may evict keys is refused
// before anything is written, and check_server() reports the settings safety depends on.
#include <string>

#include <catch2/catch.hpp>

#include <statepact/redis.hpp>
#include <statepact/statepact.hpp>

#include "../support/run.hpp"
#include "redis_admin.hpp"

namespace sp = statepact;
using namespace std::chrono_literals;

namespace {

const sp::RedisServerSetting& find(const sp::RedisServerCheck& check, const std::string& name) {
  for (const auto& s : check.settings)
    if (s.setting == name) return s;
  throw std::runtime_error("check_server reported no " + name);
}

}  // namespace

TEST_CASE("a server that may evict keys is refused before anything is written",
          "[redis][integration]") {
  // CONFIG renamed away, as some hosted servers do: the check reads INFO, which still works.
  sp::test::PrivateRedis server(
      "--maxmemory 64mb --maxmemory-policy allkeys-lru --rename-command CONFIG ''");
  sp::test::RedisAdmin admin(server.port());
  std::string message;
  bool retryable = true;
  sp::test::run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::RedisBackend b(ex, server.url());
    try {
      co_await b.register_resource("job");
    } catch (const sp::ConfigurationError& e) {
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
    } catch (const sp::ConfigurationError&) {
      refused_again = true;
    }
  });
  CHECK(refused_again);
  CHECK(admin.dbsize() == 0);

  // check_server() reads the refused server all the same, and says what is wrong.
  auto check =
      sp::test::run([&](asio::any_io_executor ex) -> asio::awaitable<sp::RedisServerCheck> {
        sp::RedisBackend b(ex, server.url());
        co_return co_await b.check_server();
      });
  CHECK_FALSE(check.ok());
  const auto& policy = find(check, "maxmemory-policy");
  CHECK(policy.value == "allkeys-lru");
  CHECK_FALSE(policy.ok);
  CHECK_THAT(policy.advice, Catch::Contains("noeviction"));
  CHECK(find(check, "appendonly").ok);
  const auto& fsync = find(check, "appendfsync");
  CHECK(fsync.value == "unknown");
  CHECK_FALSE(fsync.ok);
  CHECK(find(check, "replication").ok);
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

TEST_CASE("check_server reports the test server's settings", "[redis][integration]") {
  auto check = sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<sp::RedisServerCheck> {
    sp::RedisBackend b(ex, sp::test::redis_test_url());
    co_return co_await b.check_server();
  });
  const auto& policy = find(check, "maxmemory-policy");
  CHECK(policy.value == "noeviction");
  CHECK(policy.ok);
  CHECK(policy.advice.empty());
  // scripts/servers/redis.sh runs with AOF on; appendfsync is whatever the server says.
  const auto& aof = find(check, "appendonly");
  CHECK(aof.value == "yes");
  CHECK(aof.ok);
  const auto& reported = find(check, "appendfsync");
  CHECK((reported.value == "always") == reported.ok);
  CHECK((reported.value == "always" || reported.value == "everysec" || reported.value == "no"));
}
