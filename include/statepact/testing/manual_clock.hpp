// A clock tests move by hand, shared across threads: lease expiry without sleeping.
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include <statepact/types.hpp>

namespace statepact::testing {

class ManualClock {
 public:
  explicit ManualClock(time_point start = time_point(std::chrono::hours(24 * 365 * 50)))
      : now_(std::make_shared<std::atomic<Clock::rep>>(start.time_since_epoch().count())) {}

  time_point now() const { return time_point(Clock::duration(now_->load())); }
  void advance(Clock::duration d) { now_->fetch_add(d.count()); }

  // For MemoryOptions().clock(...): copies share this clock.
  std::function<time_point()> source() const {
    return [n = now_] { return time_point(Clock::duration(n->load())); };
  }

 private:
  std::shared_ptr<std::atomic<Clock::rep>> now_;
};

}  // namespace statepact::testing
