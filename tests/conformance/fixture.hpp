// What each backend's conformance TU provides: a fixture type per backend, listed in
// `ConformanceFixtures` before including the suites.
//
//   struct F {
//     using backend_type = ...;                  // models statepact::Backend
//     static constexpr const char* name;
//     F(asio::any_io_executor ex, milliseconds idempotency_retention = 24h);
//     backend_type& backend();
//     std::string resource(std::string base);    // a name unique to this test run
//     milliseconds short_ttl() const;            // a ttl the suite lets expire
//     asio::awaitable<void> advance(milliseconds d);   // moves the backend's clock by at least d
//   };
#pragma once

#include <chrono>
#include <string>

#include <asio/awaitable.hpp>

#include <statepact/statepact.hpp>
#include <statepact/testing/manual_clock.hpp>

using namespace std::chrono_literals;  // test code only: the suites read better with 30s, 50ms

namespace statepact::test {

struct MemoryFixture {
  using backend_type = MemoryBackend;
  static constexpr const char* name = "memory";

  explicit MemoryFixture(asio::any_io_executor, milliseconds retention = std::chrono::hours(24))
      : backend_(MemoryOptions().clock(clock_.source()).idempotency_retention(retention)) {}

  backend_type& backend() { return backend_; }
  std::string resource(std::string base) const { return base; }
  milliseconds short_ttl() const { return 1000ms; }
  asio::awaitable<void> advance(milliseconds d) {
    clock_.advance(d);
    co_return;
  }

  testing::ManualClock clock_;
  MemoryBackend backend_;
};

}  // namespace statepact::test
