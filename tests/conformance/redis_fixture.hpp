// The conformance fixture for RedisBackend against a real server named by STATEPACT_TEST_REDIS_URL
// (scripts/servers/redis.sh starts one). Time is real: advance() sleeps.
//
// Built with STATEPACT_TEST_REDIS_CLUSTER, the same suites run on the Redis Cluster named by
// STATEPACT_TEST_REDIS_CLUSTER_URL (scripts/servers/redis_cluster.sh): each fixture's names share
// one group, so a test's multi-resource requests stay in one slot, while the tests' groups spread
// over every master.
#pragma once

#include <atomic>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include <statepact/redis.hpp>

#include "fixture.hpp"

namespace statepact::test {

inline std::string redis_cluster_test_url() {
  const char* url = std::getenv("STATEPACT_TEST_REDIS_CLUSTER_URL");
  if (!url || !*url)
    throw std::runtime_error(
        "STATEPACT_TEST_REDIS_CLUSTER_URL is not set: start a cluster with "
        "scripts/servers/redis_cluster.sh (redis_cluster_start) or point it at a node of one, e.g. "
        "redis://127.0.0.1:57000");
  return url;
}

inline std::string redis_test_url() {
#ifdef STATEPACT_TEST_REDIS_CLUSTER
  return redis_cluster_test_url();
#else
  const char* url = std::getenv("STATEPACT_TEST_REDIS_URL");
  if (!url || !*url)
    throw std::runtime_error(
        "STATEPACT_TEST_REDIS_URL is not set: start a server with scripts/servers/redis.sh "
        "(redis_start) or point it at one, e.g. redis://127.0.0.1:56379/0");
  return url;
#endif
}

struct RedisFixture {
  using backend_type = RedisBackend;
#ifdef STATEPACT_TEST_REDIS_CLUSTER
  static constexpr const char* name = "redis-cluster";
#else
  static constexpr const char* name = "redis";
#endif

  explicit RedisFixture(asio::any_io_executor ex, milliseconds retention = std::chrono::hours(24))
      : backend_(ex, redis_test_url(), RedisOptions().idempotency_retention(retention)),
#ifdef STATEPACT_TEST_REDIS_CLUSTER
        suffix_(fmt::format("{{{}-{}}}", process_suffix(), ++instances())) {
  }
#else
        suffix_(fmt::format("{}-{}", process_suffix(), ++instances())) {
  }
#endif

  backend_type& backend() {
    return backend_;
  }
  // The server outlives tests: names are unique to this process and this fixture.
  std::string resource(std::string base) const {
    return base + "~" + suffix_;
  }
  milliseconds short_ttl() const {
    return 300ms;
  }
  asio::awaitable<void> advance(milliseconds d) {
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(asio::use_awaitable);
  }

 private:
  static const std::string& process_suffix() {
    static const std::string s = [] {
      std::random_device rd;
      return fmt::format("{:08x}{:08x}", rd(), rd());
    }();
    return s;
  }
  static std::atomic<int>& instances() {
    static std::atomic<int> n{0};
    return n;
  }

  RedisBackend backend_;
  std::string suffix_;
};

}  // namespace statepact::test
