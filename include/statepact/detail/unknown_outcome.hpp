// The rules for a commit whose outcome is unknown (the reply was lost after it was sent): which
// answers to a resend end the unknown state, and how long a resend may still be sent. No I/O; the
// session and Manager::run() follow these rules and nothing else decides them.
#pragma once

#include <chrono>

#include <statepact/detail/backoff.hpp>
#include <statepact/errors.hpp>
#include <statepact/types.hpp>

namespace statepact::detail {

// Only a refusal that storage gives before it writes anything proves that the resend, and so the
// first send (same key, same fingerprint), was not applied. Every other failure (a lock or
// statement timeout, a lost connection, a reply that cannot be read, a server error) may come
// after the first send was applied, so the outcome stays unknown.
constexpr bool proves_not_applied(ErrorCode c) {
  switch (c) {
    case ErrorCode::conflict:
    case ErrorCode::lease_lost:
    case ErrorCode::fence_required:
    case ErrorCode::resource_not_found:
    case ErrorCode::invalid_argument:
    case ErrorCode::idempotency_key_reused:
      return true;
    default:
      return false;
  }
}

// A resend is safe only while storage still holds the idempotency record of the first send: after
// that, a first send that was applied would be checked (and perhaps applied) again. The record
// lives `retention` from the moment storage applied the commit, which is after the first send
// left; the local steady clock and storage's clock may run at different rates, and the resend
// itself takes time to arrive. So the window is counted from just before the first send and is
// half the retention: a resend starts only inside it.
constexpr milliseconds resend_window(milliseconds retention) {
  return retention / 2;
}

class ResendWindow {
 public:
  using steady = std::chrono::steady_clock;
  ResendWindow() = default;
  ResendWindow(steady::time_point first_sent, milliseconds retention)
      : closes_(first_sent + resend_window(retention)) {}
  // Whether a resend may start at `now`.
  bool open(steady::time_point now) const { return now < closes_; }

 private:
  steady::time_point closes_{};
};

// The longest a retry schedule can wait in total between the first send and its last resend:
// the sum of every backoff ceiling (full jitter never waits longer than the ceiling).
inline milliseconds longest_resend_schedule(int resends, milliseconds initial, double multiplier,
                                            milliseconds cap) {
  milliseconds total{0};
  for (int i = 1; i <= resends; ++i) {
    total += backoff_ceiling(i, initial, multiplier, cap);
    if (total > std::chrono::hours(24 * 365 * 10)) break;  // far past any retention: stop adding
  }
  return total;
}

}  // namespace statepact::detail
