// Runs a coroutine to completion from a plain test: Catch2 assertions stay outside co_await.
#pragma once

#include <exception>
#include <optional>
#include <thread>
#include <type_traits>
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>

namespace statepact::test {

// `make` is called with an executor and returns an awaitable; it is kept alive (with its captures)
// until the coroutine finished. Exceptions are rethrown here. `threads` > 1 runs the io_context on
// that many threads.
template <class F>
auto run(F make, int threads = 1) {
  asio::io_context io(threads);
  using A = std::invoke_result_t<F&, asio::any_io_executor>;
  using T = typename A::value_type;
  std::exception_ptr error;
  std::conditional_t<std::is_void_v<T>, int, std::optional<T>> result{};
  if constexpr (std::is_void_v<T>) {
    asio::co_spawn(io, make(io.get_executor()), [&](std::exception_ptr e) { error = e; });
  } else {
    asio::co_spawn(io, make(io.get_executor()), [&](std::exception_ptr e, T v) {
      error = e;
      if (!e) result.emplace(std::move(v));
    });
  }
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back([&] { io.run(); });
  io.run();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  if constexpr (!std::is_void_v<T>) return std::move(*result);
}

// The outcome of running an awaitable: its exception, if any, so a test can check the type.
template <class E, class F>
E expect_throw(F make) {
  try {
    run(std::move(make));
  } catch (const E& e) {
    return e;
  }
  throw std::runtime_error("expected exception was not thrown");
}

}  // namespace statepact::test
