// The pool's connections (async_link.hpp): at most `cap` open, idle ones reused, and calls that
// find none free waiting in order. Used from any thread; the mutex guards the lists, and a waiter
// is resumed on its own executor. No I/O: a template over the connection type, so its rules are
// unit-tested without a server.
#pragma once

#include <cstddef>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/awaitable.hpp>
#include <asio/execution/outstanding_work.hpp>
#include <asio/post.hpp>
#include <asio/prefer.hpp>
#include <asio/use_awaitable.hpp>

#include <statepact/errors.hpp>

#include "async_link.hpp"  // AsyncPool

namespace statepact::detail::pg {

template <class Conn>
class BasicPool {
 public:
  explicit BasicPool(std::size_t cap) : cap_(cap) {}

  // Without waiting: true with an idle connection in `out`, or with null when the caller may open
  // one (as take()); false when `cap` are in use, and take() waits in order. Throws
  // BackendUnavailableError once the pool is closed. Saves take()'s pass through the scheduler.
  bool try_take(std::unique_ptr<Conn>& out) {
    std::lock_guard guard(mu_);
    if (closed_) std::rethrow_exception(closed_error());
    return grab(out);
  }

  // An idle connection, or null: the caller may open one (its slot is counted, so it gives the
  // connection back or calls drop()). Waits while `cap` are in use. Throws BackendUnavailableError
  // once the pool is closed.
  asio::awaitable<std::unique_ptr<Conn>> take() {
    auto init = [this](auto handler) {
      std::unique_lock guard(mu_);
      if (closed_) {
        guard.unlock();
        complete(std::move(handler), closed_error(), nullptr);
        return;
      }
      std::unique_ptr<Conn> link;
      if (grab(link)) {
        guard.unlock();
        complete(std::move(handler), nullptr, std::move(link));
        return;
      }
      waiters_.push_back(std::make_unique<Waiter<decltype(handler)>>(std::move(handler)));
    };
    co_return co_await asio::async_initiate<const asio::use_awaitable_t<>&,
                                            void(std::exception_ptr, std::unique_ptr<Conn>)>(
        init, asio::use_awaitable);
  }

  // A connection taken (or opened) and still sound goes back, to the first waiter if any.
  void give_back(std::unique_ptr<Conn> link) {
    std::unique_lock guard(mu_);
    if (closed_) {
      --open_;
      guard.unlock();
      return;  // the connection closes here
    }
    if (waiters_.empty()) {
      idle_.push_back(std::move(link));
      return;
    }
    auto w = std::move(waiters_.front());
    waiters_.pop_front();
    guard.unlock();
    w->resume(nullptr, std::move(link));
  }

  // A connection taken (or a slot to open one) is gone: its slot goes to the first waiter.
  void drop() {
    std::unique_lock guard(mu_);
    if (closed_ || waiters_.empty()) {
      --open_;
      return;
    }
    auto w = std::move(waiters_.front());
    waiters_.pop_front();
    guard.unlock();
    w->resume(nullptr, nullptr);
  }

  // The backend is going: idle connections close, waiters fail, later calls fail.
  void close() {
    std::deque<std::unique_ptr<WaiterBase>> waiters;
    std::vector<std::unique_ptr<Conn>> idle;
    {
      std::lock_guard guard(mu_);
      closed_ = true;
      waiters.swap(waiters_);
      idle.swap(idle_);
      open_ -= idle.size();
    }
    for (auto& w : waiters) w->resume(closed_error(), nullptr);
  }

 private:
  // With mu_ held: an idle connection in `out`, or null there and a slot counted for the caller
  // to open one; false when `cap` are in use. Idle connections or free slots never coexist with
  // waiters (give_back() and drop() hand them to the first waiter), so this jumps no queue.
  bool grab(std::unique_ptr<Conn>& out) {
    if (!idle_.empty()) {
      out = std::move(idle_.back());
      idle_.pop_back();
      return true;
    }
    if (open_ < cap_) {
      ++open_;
      out = nullptr;
      return true;
    }
    return false;
  }

  struct WaiterBase {
    virtual ~WaiterBase() = default;
    virtual void resume(std::exception_ptr error, std::unique_ptr<Conn> link) = 0;
  };

  // A waiting caller; it keeps its executor's io_context running while it waits.
  template <class Handler>
  struct Waiter final : WaiterBase {
    explicit Waiter(Handler h)
        : work(asio::prefer(asio::get_associated_executor(h),
                            asio::execution::outstanding_work.tracked)),
          handler(std::move(h)) {}
    void resume(std::exception_ptr error, std::unique_ptr<Conn> link) override {
      complete(std::move(handler), error, std::move(link));
    }
    decltype(asio::prefer(std::declval<asio::associated_executor_t<Handler>>(),
                          asio::execution::outstanding_work.tracked)) work;
    Handler handler;
  };

  // Always through the handler's executor, never inline: the caller may hold the pool's mutex
  // or be deep in another call's completion.
  template <class Handler>
  static void complete(Handler h, std::exception_ptr error, std::unique_ptr<Conn> link) {
    auto ex = asio::get_associated_executor(h);
    asio::post(ex, [h = std::move(h), error, link = std::move(link)]() mutable {
      std::move(h)(error, std::move(link));
    });
  }

  static std::exception_ptr closed_error() {
    return std::make_exception_ptr(
        BackendUnavailableError("the PostgreSQL backend is shutting down"));
  }

  const std::size_t cap_;
  std::mutex mu_;
  std::size_t open_ = 0;
  bool closed_ = false;
  std::vector<std::unique_ptr<Conn>> idle_;
  std::deque<std::unique_ptr<WaiterBase>> waiters_;
};

using AsyncPool = BasicPool<AsyncLink>;

}  // namespace statepact::detail::pg
