// Real-time waits for tests that interleave coroutines (never to wait out a lease: clocks do that).
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>

#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

namespace statepact::test {

inline asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
}

// Thrown by a wait that timed out: it fails the test with what was awaited.
struct WaitTimedOut : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Polls pred every few milliseconds until it holds. If `limit` passes first it throws
// WaitTimedOut naming `what`, which fails the test. It returns nothing, so no caller can CHECK a
// result that could only ever be true.
template <class P>
asio::awaitable<void> eventually(P pred, std::chrono::milliseconds limit = std::chrono::seconds(10),
                                 std::string what = "a condition") {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline)
      throw WaitTimedOut("timed out after " + std::to_string(limit.count()) + " ms waiting for " +
                         what);
    co_await sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace statepact::test
