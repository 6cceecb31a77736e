// How Manager::run re-runs a transaction after a retryable error.
#pragma once

#include <chrono>

#include <statepact/detail/backoff.hpp>
#include <statepact/detail/validate.hpp>
#include <statepact/errors.hpp>
#include <statepact/types.hpp>

namespace statepact {

class RetryPolicy {
 public:
  RetryPolicy() = default;

  RetryPolicy& max_attempts(int n) {
    if (n < 1) throw InvalidArgumentError("max_attempts must be at least 1");
    max_attempts_ = n;
    return *this;
  }
  RetryPolicy& initial_backoff(milliseconds d) {
    if (d < milliseconds::zero() || d > detail::max_timeout)
      throw InvalidArgumentError(
          fmt::format("initial_backoff must be between 0 and {} ms, got {} ms",
                      detail::max_timeout.count(), d.count()));
    initial_ = d;
    return *this;
  }
  RetryPolicy& max_backoff(milliseconds d) {
    if (d < milliseconds::zero() || d > detail::max_timeout)
      throw InvalidArgumentError(fmt::format("max_backoff must be between 0 and {} ms, got {} ms",
                                             detail::max_timeout.count(), d.count()));
    cap_ = d;
    return *this;
  }
  RetryPolicy& multiplier(double m) {
    if (!(m >= 1.0)) throw InvalidArgumentError("backoff multiplier must be at least 1");
    multiplier_ = m;
    return *this;
  }

  int max_attempts() const { return max_attempts_; }
  milliseconds initial_backoff() const { return initial_; }
  milliseconds max_backoff() const { return cap_; }
  double multiplier() const { return multiplier_; }

  // The wait after the `attempt`-th failure, drawn with full jitter.
  milliseconds delay(int attempt, double unit = detail::random_unit()) const {
    return detail::full_jitter(detail::backoff_ceiling(attempt, initial_, multiplier_, cap_), unit);
  }

 private:
  int max_attempts_ = 5;
  milliseconds initial_{10};
  milliseconds cap_{1000};
  double multiplier_ = 2.0;
};

}  // namespace statepact
