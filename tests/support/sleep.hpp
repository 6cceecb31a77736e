// Real-time waits for tests that interleave coroutines (never to wait out a lease: clocks do that).
#pragma once

#include <chrono>

#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

namespace statepact::test {

inline asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
}

// Polls pred every few milliseconds until it holds or `limit` passes; returns whether it held.
template <class P>
asio::awaitable<bool> eventually(P pred,
                                 std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) co_return false;
    co_await sleep_for(std::chrono::milliseconds(5));
  }
  co_return true;
}

}  // namespace statepact::test
