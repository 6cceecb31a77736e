// The PostgreSQL fixture of the conformance suite: a real server, real time. The server's URL
// comes from STATEPACT_TEST_POSTGRES_URL (scripts/servers/postgres.sh starts one); names get a
// per-process random suffix so that runs and parallel test processes never share a resource.
#pragma once

#include <chrono>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include <statepact/postgres.hpp>

#include "fixture.hpp"

namespace statepact::test {

inline std::string postgres_test_url() {
  const char* url = std::getenv("STATEPACT_TEST_POSTGRES_URL");
  if (!url || !*url)
    throw std::runtime_error(
        "STATEPACT_TEST_POSTGRES_URL is not set: start a server with scripts/servers/postgres.sh "
        "(postgres_start) or point it at one, e.g. postgresql://postgres@127.0.0.1:55432/db");
  return url;
}

inline const std::string& run_suffix() {
  static const std::string suffix = [] {
    std::random_device rd;
    std::mt19937_64 rng((static_cast<std::uint64_t>(rd()) << 32) ^ rd());
    return fmt::format("{:016x}", rng());
  }();
  return suffix;
}

struct PostgresFixture {
  using backend_type = PostgresBackend;
  static constexpr const char* name = "postgres";

  explicit PostgresFixture(asio::any_io_executor ex,
                           milliseconds retention = std::chrono::hours(24))
      : backend_(ex, postgres_test_url(),
                 // A short deadlock check, so the request that closes a wait cycle is the one
                 // refused (as in every backend), rather than whichever waiter checks first.
                 PostgresOptions().idempotency_retention(retention).deadlock_timeout(10ms)) {}

  backend_type& backend() { return backend_; }
  std::string resource(std::string base) const { return base + "~" + run_suffix(); }
  milliseconds short_ttl() const { return 300ms; }
  // The server's clock decides expiry: let real time pass.
  asio::awaitable<void> advance(milliseconds d) {
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(asio::use_awaitable);
  }

  PostgresBackend backend_;
};

}  // namespace statepact::test
