// Runs a blocking function on a connection thread and resumes the awaiting coroutine on its own
// executor with the result (or exception). `co_await asio::post(pool)` would not do: it does not
// move the coroutine, so the blocking call would run on the caller's thread.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <utility>

#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/awaitable.hpp>
#include <asio/execution/outstanding_work.hpp>
#include <asio/post.hpp>
#include <asio/prefer.hpp>
#include <asio/use_awaitable.hpp>

#include <statepact/errors.hpp>

#include "worker.hpp"

namespace statepact::detail::pg {

template <class T, class Handler, class Fn>
class CallJob final : public Job {
 public:
  CallJob(Handler handler, Fn fn)
      : handler_(std::move(handler)),
        fn_(std::move(fn)),
        // Keeps the caller's io_context running while the job is away on another thread.
        ex_(asio::prefer(asio::get_associated_executor(handler_),
                         asio::execution::outstanding_work.tracked)) {}

  void run(Link& link) noexcept override {
    std::exception_ptr error;
    T value{};
    try {
      value = fn_(link);
    } catch (...) {
      error = std::current_exception();
    }
    complete(error, std::move(value));
  }

  void abandon() noexcept override {
    complete(
        std::make_exception_ptr(BackendUnavailableError("the PostgreSQL backend is shutting down")),
        T{});
  }

 private:
  void complete(std::exception_ptr error, T value) noexcept {
    asio::post(ex_, [h = std::move(handler_), error, v = std::move(value)]() mutable {
      // The cancellation handler must be gone before the operation completes.
      asio::get_associated_cancellation_slot(h).clear();
      std::move(h)(error, std::move(v));
    });
  }

  Handler handler_;
  Fn fn_;
  decltype(asio::prefer(std::declval<asio::associated_executor_t<Handler>>(),
                        asio::execution::outstanding_work.tracked)) ex_;
};

// `fn(Link&) -> T` runs on a thread of `queue`. With `cancel`, a cancellation of the awaiting
// coroutine cancels the statement job `seq` is running (fn arms `cancel` around it).
template <class T, class Fn>
asio::awaitable<T> call(JobQueue& queue, Fn fn, std::shared_ptr<CancelPoint> cancel = nullptr,
                        std::uint64_t seq = 0) {
  auto init = [&queue, &fn, cancel, seq](auto handler) {
    using H = decltype(handler);
    if (cancel) {
      auto slot = asio::get_associated_cancellation_slot(handler);
      if (slot.is_connected())
        slot.assign([cancel, seq](asio::cancellation_type) { cancel->cancel(seq); });
    }
    queue.push(std::make_unique<CallJob<T, H, Fn>>(std::move(handler), std::move(fn)));
  };
  co_return co_await asio::async_initiate<const asio::use_awaitable_t<>&,
                                          void(std::exception_ptr, T)>(init, asio::use_awaitable);
}

}  // namespace statepact::detail::pg
