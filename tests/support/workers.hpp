// Coroutines a test starts and must see end before anything they use is destroyed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/post.hpp>
#include <asio/strand.hpp>

#include "sleep.hpp"

namespace statepact::test {

// Each worker runs on its own strand (workers still run in parallel on a multi-threaded
// io_context), so that it can be cancelled safely from the joining coroutine.
class Workers {
 public:
  explicit Workers(asio::any_io_executor ex) : ex_(std::move(ex)) {}
  Workers(const Workers&) = delete;
  Workers& operator=(const Workers&) = delete;
  // Destroying workers that still run would free what they use under them: stop loudly instead.
  ~Workers() {
    if (running_.load() != 0) {
      std::fprintf(stderr, "test bug: %d worker(s) still running when their owner ended\n",
                   running_.load());
      std::abort();
    }
  }

  template <class Awaitable>
  void spawn(Awaitable work) {
    auto w = std::make_shared<Worker>(asio::make_strand(ex_));
    workers_.push_back(w);
    ++running_;
    asio::co_spawn(w->strand, std::move(work),
                   asio::bind_cancellation_slot(w->stop.slot(), [this, w](std::exception_ptr e) {
                     if (e) {
                       std::lock_guard g(mu_);
                       ++failures_;
                       if (!first_failure_) first_failure_ = e;
                     }
                     --running_;
                   }));
  }

  int running() const { return running_.load(); }

  // Waits until every worker ended; rethrows the first worker's exception. If `limit` passes
  // first, cancels the workers, keeps waiting until they all ended, and throws WaitTimedOut.
  asio::awaitable<void> join(std::chrono::milliseconds limit, std::string what = "workers") {
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + limit;
    while (running_.load() > 0 && clock::now() < deadline)
      co_await sleep_for(std::chrono::milliseconds(5));
    if (running_.load() > 0) {
      const int stuck = running_.load();
      for (auto& w : workers_)
        asio::post(w->strand, [w] { w->stop.emit(asio::cancellation_type::terminal); });
      const auto grace = clock::now() + limit;
      while (running_.load() > 0) {
        if (clock::now() > grace) {
          std::fprintf(stderr, "test bug: %s ignore cancellation; aborting\n", what.c_str());
          std::abort();
        }
        co_await sleep_for(std::chrono::milliseconds(5));
      }
      throw WaitTimedOut(std::to_string(stuck) + " of " + std::to_string(workers_.size()) + " " +
                         what + " still ran after " + std::to_string(limit.count()) +
                         " ms: cancelled and joined them");
    }
    std::lock_guard g(mu_);
    if (first_failure_) std::rethrow_exception(first_failure_);
  }

 private:
  struct Worker {
    explicit Worker(asio::strand<asio::any_io_executor> s) : strand(std::move(s)) {}
    asio::strand<asio::any_io_executor> strand;
    asio::cancellation_signal stop;
  };

  asio::any_io_executor ex_;
  std::vector<std::shared_ptr<Worker>> workers_;
  std::atomic<int> running_{0};
  std::mutex mu_;
  int failures_ = 0;
  std::exception_ptr first_failure_;
};

}  // namespace statepact::test
