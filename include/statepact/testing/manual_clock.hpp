/// @file
/// A clock tests move by hand, shared across threads: lease expiry without sleeping.
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include <statepact/types.hpp>

namespace statepact::testing {

/// A clock for tests that moves only when advanced: give source() to MemoryOptions::clock and
/// drive lease expiry and idempotency retention without sleeping. Copies share one time (an
/// atomic), so it may be read and advanced from any thread.
class ManualClock {
 public:
  /// A clock standing at `start` (default: 2019-12-20 UTC, 50 times 365 days after the epoch).
  explicit ManualClock(time_point start = time_point(std::chrono::hours(24 * 365 * 50)))
      : now_(std::make_shared<std::atomic<Clock::rep>>(start.time_since_epoch().count())) {}

  /// The current time.
  time_point now() const { return time_point(Clock::duration(now_->load())); }
  /// Moves the time forward by `d` (backward if negative), for every copy and source().
  void advance(Clock::duration d) { now_->fetch_add(d.count()); }

  /// For MemoryOptions().clock(...): a function reading this clock; it shares the time with this
  /// clock and its copies, and stays valid after they are gone.
  std::function<time_point()> source() const {
    return [n = now_] { return time_point(Clock::duration(n->load())); };
  }

 private:
  std::shared_ptr<std::atomic<Clock::rep>> now_;
};

}  // namespace statepact::testing
