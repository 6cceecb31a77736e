// What the fixtures of the server backends share: the server named by an environment variable that
// the test script sets, names unique to each fixture (the server outlives every test), and real
// time (the server's clock decides expiry, so advance() lets time pass).
#pragma once

#include <atomic>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include "fixture.hpp"

namespace statepact::test {

// The URL in `variable`; unset is an error, never a skip: CI must not pass without the server.
inline std::string server_url(const char* variable, const char* how_to_start) {
  const char* url = std::getenv(variable);
  if (!url || !*url)
    throw std::runtime_error(fmt::format("{} is not set: {}", variable, how_to_start));
  return url;
}

// Random per test process, so runs and parallel test processes never share a name.
inline const std::string& run_suffix() {
  static const std::string suffix = [] {
    std::random_device rd;
    return fmt::format("{:08x}{:08x}", rd(), rd());
  }();
  return suffix;
}

class ServerFixtureBase {
 public:
  std::string resource(std::string base) const { return base + "~" + suffix_; }
  milliseconds short_ttl() const { return 300ms; }
  asio::awaitable<void> advance(milliseconds d) {
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(asio::use_awaitable);
  }

 private:
  // Counted per fixture too, so two tests of one process never share a name either.
  static std::string next_suffix() {
    static std::atomic<int> instances{0};
    return fmt::format("{}-{}", run_suffix(), ++instances);
  }

  std::string suffix_ = next_suffix();
};

}  // namespace statepact::test
