// Exponential backoff with full jitter, as a pure function of the attempt and a random draw, so the
// schedule is unit-tested without sleeping.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include <statepact/types.hpp>

namespace statepact::detail {

// The ceiling for the wait after `attempt` failures (attempt >= 1): initial * multiplier^(n-1),
// capped.
inline milliseconds backoff_ceiling(int attempt, milliseconds initial, double multiplier,
                                    milliseconds cap) {
  double c = static_cast<double>(initial.count()) * std::pow(multiplier, std::max(0, attempt - 1));
  c = std::min(c, static_cast<double>(cap.count()));
  return milliseconds(static_cast<milliseconds::rep>(c));
}

// Full jitter: uniform in [0, ceiling]. `unit` is a draw in [0, 1).
inline milliseconds full_jitter(milliseconds ceiling, double unit) {
  return milliseconds(static_cast<milliseconds::rep>(std::floor(unit * (ceiling.count() + 1))));
}

inline double random_unit() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

}  // namespace statepact::detail
