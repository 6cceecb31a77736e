/// @file
/// How Manager::run re-runs a transaction after a retryable error.
#pragma once

#include <chrono>

#include <statepact/detail/backoff.hpp>
#include <statepact/detail/validate.hpp>
#include <statepact/errors.hpp>
#include <statepact/types.hpp>

namespace statepact {

/// How often and how patiently Manager::run() tries a transaction: attempts, and exponential
/// backoff with full jitter between them. A plain value; each setter checks its argument.
class RetryPolicy {
 public:
  /// Defaults: 5 attempts, backoff from 10 ms doubling up to 1000 ms.
  RetryPolicy() = default;

  /// How many times run() runs the transaction, the first included (also how many times it
  /// resends a commit of unknown outcome).
  /// @throws InvalidArgumentError if n < 1.
  RetryPolicy& max_attempts(int n) {
    if (n < 1) throw InvalidArgumentError("max_attempts must be at least 1");
    max_attempts_ = n;
    return *this;
  }
  /// The ceiling of the wait after the first failure.
  /// @throws InvalidArgumentError unless 0 <= d <= 1 hour.
  RetryPolicy& initial_backoff(milliseconds d) {
    if (d < milliseconds::zero() || d > detail::max_timeout)
      throw InvalidArgumentError(
          fmt::format("initial_backoff must be between 0 and {} ms, got {} ms",
                      detail::max_timeout.count(), d.count()));
    initial_ = d;
    return *this;
  }
  /// The cap on the wait's ceiling, however many attempts failed.
  /// @throws InvalidArgumentError unless 0 <= d <= 1 hour.
  RetryPolicy& max_backoff(milliseconds d) {
    if (d < milliseconds::zero() || d > detail::max_timeout)
      throw InvalidArgumentError(fmt::format("max_backoff must be between 0 and {} ms, got {} ms",
                                             detail::max_timeout.count(), d.count()));
    cap_ = d;
    return *this;
  }
  /// How much the ceiling grows with each failed attempt.
  /// @throws InvalidArgumentError unless m >= 1 (NaN is refused).
  RetryPolicy& multiplier(double m) {
    if (!(m >= 1.0)) throw InvalidArgumentError("backoff multiplier must be at least 1");
    multiplier_ = m;
    return *this;
  }

  /// The number of attempts, the first included.
  int max_attempts() const { return max_attempts_; }
  /// The ceiling of the first wait.
  milliseconds initial_backoff() const { return initial_; }
  /// The cap on the ceiling.
  milliseconds max_backoff() const { return cap_; }
  /// The ceiling's growth factor.
  double multiplier() const { return multiplier_; }

  /// The wait after the `attempt`-th failure (from 1), drawn with full jitter: uniform in
  /// [0, min(max_backoff, initial_backoff * multiplier^(attempt - 1))]. `unit` is the random draw
  /// in [0, 1) (pass one to make the result deterministic).
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
