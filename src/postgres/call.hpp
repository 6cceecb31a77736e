// Runs a blocking function on a connection thread and resumes the awaiting coroutine on its own
// executor with the result (or exception). `co_await asio::post(pool)` would not do: it does not
// move the coroutine, so the blocking call would run on the caller's thread.
//
// Every call races a client-side deadline: a server that stops answering would otherwise hold the
// caller for as long as the connection thread is blocked. Whichever finishes first, the job or
// the timer, completes the caller; the other finds the handler gone and does nothing.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/awaitable.hpp>
#include <asio/dispatch.hpp>
#include <asio/execution/outstanding_work.hpp>
#include <asio/post.hpp>
#include <asio/prefer.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include <fmt/format.h>

#include <statepact/errors.hpp>

#include "failures.hpp"
#include "worker.hpp"

namespace statepact::detail::pg {

// The client-side deadline of one call, and what a statement already sent may have done.
struct Deadline {
  milliseconds after;
  LostReply lost = LostReply::write();
};

// Who answers the caller: the job or the deadline. Shared by both; the mutex guards the handler.
template <class T, class Handler>
class Race : public std::enable_shared_from_this<Race<T, Handler>> {
  using Tracked = decltype(asio::prefer(std::declval<asio::associated_executor_t<Handler>>(),
                                        asio::execution::outstanding_work.tracked));

 public:
  Race(Handler handler, Deadline deadline)
      : deadline_(deadline),
        timer_(asio::get_associated_executor(handler)),
        // Keeps the caller's io_context running while the job is away on another thread.
        work_(asio::prefer(asio::get_associated_executor(handler),
                           asio::execution::outstanding_work.tracked)),
        handler_(std::move(handler)) {}

  void arm() {
    timer_.expires_after(deadline_.after);
    timer_.async_wait([self = this->shared_from_this()](std::error_code ec) {
      if (!ec) self->expire();
    });
  }

  const Deadline& deadline() const { return deadline_; }
  // The caller's executor, where the answer goes.
  auto executor() { return timer_.get_executor(); }

  // On the connection thread, before the statement: false when the deadline already answered
  // (nothing is sent then).
  bool start() {
    std::lock_guard guard(mu_);
    if (!handler_) return false;
    started_ = true;
    return true;
  }

  // After this, finish() may answer the caller at once when it runs on the caller's executor (a
  // pool call, after its first wait): one pass through the scheduler fewer. Until then, and from a
  // connection thread, the answer is posted, so a call that fails before it waits never resumes
  // its caller inside the caller's own initiation (a retry loop would then grow the stack).
  void answer_inline() { inline_ = true; }

  // The job's answer, unless the deadline came first.
  void finish(std::exception_ptr error, T value) {
    std::optional<Handler> h;
    std::optional<Tracked> work;
    {
      std::lock_guard guard(mu_);
      if (!handler_) return;
      // Asio's handlers move-construct but do not move-assign: no swap.
      h.emplace(std::move(*handler_));
      handler_.reset();
      work.emplace(std::move(*work_));
      work_.reset();
    }
    auto self = this->shared_from_this();
    auto answer = [self, h = std::move(*h), error, v = std::move(value)]() mutable {
      self->timer_.cancel();
      deliver(std::move(h), error, std::move(v));
    };
    if (inline_)
      asio::dispatch(*work, std::move(answer));
    else
      asio::post(*work, std::move(answer));
  }

 private:
  // On the caller's executor.
  void expire() {
    std::optional<Handler> h;
    bool started = false;
    {
      std::lock_guard guard(mu_);
      if (!handler_) return;
      h.emplace(std::move(*handler_));
      handler_.reset();
      work_.reset();  // a stuck connection thread does not keep the caller's io_context alive
      started = started_;
    }
    deliver(std::move(*h), timeout_error(started), T{});
  }

  std::exception_ptr timeout_error(bool started) const {
    const auto ms = deadline_.after.count();
    if (!started)
      return lost_reply_error("PostgreSQL", deadline_.lost, Loss::not_sent,
                              fmt::format("no connection was free within {} ms", ms));
    return lost_reply_error("PostgreSQL", deadline_.lost, Loss::no_reply,
                            fmt::format("no reply within {} ms", ms));
  }

  static void deliver(Handler h, std::exception_ptr error, T value) {
    // The cancellation handler must be gone before the operation completes.
    asio::get_associated_cancellation_slot(h).clear();
    std::move(h)(error, std::move(value));
  }

  const Deadline deadline_;
  asio::steady_timer timer_;
  std::mutex mu_;
  std::optional<Tracked> work_;
  std::optional<Handler> handler_;
  bool started_ = false;
  std::atomic<bool> inline_{false};
};

template <class T, class Handler, class Fn>
class CallJob final : public Job {
 public:
  CallJob(std::shared_ptr<Race<T, Handler>> race, Fn fn, std::function<void(Link&)> on_skip)
      : race_(std::move(race)), fn_(std::move(fn)), on_skip_(std::move(on_skip)) {}

  void run(Link& link) noexcept override {
    if (!race_->start()) {
      // The deadline answered first: the job is not run, but what it would have cleaned up
      // (a session's transaction) still must be.
      if (on_skip_) on_skip_(link);
      return;
    }
    std::exception_ptr error;
    T value{};
    try {
      value = fn_(link);
    } catch (...) {
      // Whatever escaped the job (a reply that does not parse, a libpqxx usage error) reaches
      // the caller as statepact's error.
      try {
        rethrow_mapped(link, race_->deadline().lost);
      } catch (...) {
        error = std::current_exception();
      }
    }
    race_->finish(error, std::move(value));
  }

  void abandon() noexcept override {
    race_->finish(
        std::make_exception_ptr(BackendUnavailableError("the PostgreSQL backend is shutting down")),
        T{});
  }

 private:
  std::shared_ptr<Race<T, Handler>> race_;
  Fn fn_;
  std::function<void(Link&)> on_skip_;
};

// `fn(Link&) -> T` runs on a thread of `queue`, within `deadline`; if the deadline passes before
// it starts, `on_skip(Link&)` (must not throw) runs there instead. With `cancel`, a cancellation
// of the awaiting coroutine cancels the statement job `seq` is running (fn arms `cancel` around
// it).
template <class T, class Fn>
asio::awaitable<T> call(JobQueue& queue, Deadline deadline, Fn fn,
                        std::shared_ptr<CancelPoint> cancel = nullptr, std::uint64_t seq = 0,
                        std::function<void(Link&)> on_skip = nullptr) {
  auto init = [&queue, &fn, &on_skip, deadline, cancel, seq](auto handler) {
    using H = decltype(handler);
    if (cancel) {
      auto slot = asio::get_associated_cancellation_slot(handler);
      if (slot.is_connected())
        slot.assign([cancel, seq](asio::cancellation_type) { cancel->cancel(seq); });
    }
    auto race = std::make_shared<Race<T, H>>(std::move(handler), deadline);
    race->arm();
    queue.push(
        std::make_unique<CallJob<T, H, Fn>>(std::move(race), std::move(fn), std::move(on_skip)));
  };
  co_return co_await asio::async_initiate<const asio::use_awaitable_t<>&,
                                          void(std::exception_ptr, T)>(init, asio::use_awaitable);
}

}  // namespace statepact::detail::pg
