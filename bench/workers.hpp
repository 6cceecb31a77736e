// Running a benchmark's coroutines: one body to its end, or several workers side by side.
#pragma once

#include <chrono>
#include <exception>
#include <functional>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

namespace statepact::bench {

// Runs `body` to its end on `io`, rethrowing what it threw. A Redis connection keeps `io` busy,
// so this runs handlers until the body is done instead of io.run().
inline void run_to_end(asio::io_context& io, std::function<asio::awaitable<void>()> body) {
  bool finished = false;
  std::exception_ptr failure;
  asio::co_spawn(io, std::move(body), [&](std::exception_ptr e) {
    failure = e;
    finished = true;
  });
  io.restart();
  while (!finished) io.run_one();
  if (failure) std::rethrow_exception(failure);
}

// Runs worker(0) .. worker(n - 1) side by side and returns when all have ended; a worker's
// exception ends the benchmark.
inline asio::awaitable<void> side_by_side(int n, std::function<asio::awaitable<void>(int)> worker) {
  auto ex = co_await asio::this_coro::executor;
  int running = n;
  for (int w = 0; w < n; ++w)
    asio::co_spawn(
        ex,
        [&running, &worker, w]() -> asio::awaitable<void> {
          co_await worker(w);
          --running;
        },
        [](std::exception_ptr e) {
          if (e) std::rethrow_exception(e);
        });
  asio::steady_timer t(ex);
  while (running > 0) {
    t.expires_after(std::chrono::milliseconds(1));
    co_await t.async_wait(asio::use_awaitable);
  }
}

}  // namespace statepact::bench
