// Runs several coroutines at once on the current executor and waits for all of them.
#pragma once

#include <exception>
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/channel.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

namespace demo {

template <class T>
asio::awaitable<std::vector<T>> together(std::vector<asio::awaitable<T>> tasks) {
  auto ex = co_await asio::this_coro::executor;
  std::vector<T> results(tasks.size());
  std::exception_ptr failure;
  // void(error_code) alone is ambiguous in Asio 1.22's channel traits; the int is unused.
  asio::experimental::channel<void(std::error_code, int)> done(ex, tasks.size());
  for (std::size_t i = 0; i < tasks.size(); ++i)
    asio::co_spawn(ex, std::move(tasks[i]), [&, i](std::exception_ptr e, T value) {
      if (e && !failure) failure = e;
      results[i] = std::move(value);
      done.try_send(std::error_code(), 0);
    });
  for (std::size_t i = 0; i < results.size(); ++i)
    co_await done.async_receive(asio::experimental::as_tuple(asio::use_awaitable));
  if (failure) std::rethrow_exception(failure);
  co_return results;
}

}  // namespace demo
