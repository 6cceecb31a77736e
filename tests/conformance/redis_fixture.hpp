// The conformance fixture for RedisBackend against the server named by STATEPACT_TEST_REDIS_URL
// (scripts/servers/redis.sh starts one).
#pragma once

#include <statepact/redis.hpp>

#include "server_fixture.hpp"

namespace statepact::test {

inline std::string redis_test_url() {
  return server_url("STATEPACT_TEST_REDIS_URL",
                    "start a server with scripts/servers/redis.sh (redis_start) or point it at "
                    "one, e.g. redis://127.0.0.1:56379/0");
}

struct RedisFixture : ServerFixtureBase {
  using backend_type = RedisBackend;
  static constexpr const char* name = "redis";

  explicit RedisFixture(asio::any_io_executor ex, milliseconds retention = std::chrono::hours(24))
      : backend_(ex, redis_test_url(), RedisOptions().idempotency_retention(retention)) {}

  backend_type& backend() { return backend_; }

  RedisBackend backend_;
};

}  // namespace statepact::test
