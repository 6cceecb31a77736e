// hold()'s local deadline and renewal schedule as pure decisions on the local steady clock. They do
// no I/O, read no clock and arm no timer: the driver (hold_keeper.hpp) passes the times in and
// waits as told.
//
// Storage lets another owner in once its clock has run a ttl past the moment it applied the last
// acquire or renewal. That moment is no earlier than when the call was sent, so a deadline counted
// on the local clock from the send, less a margin for the two clocks' rates, passes before storage
// can let anyone in, whenever the reply comes, and even if no reply ever comes.
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>

#include <fmt/format.h>

#include <statepact/errors.hpp>
#include <statepact/types.hpp>

namespace statepact::detail {

using steady_time = std::chrono::steady_clock::time_point;

// How much sooner than the ttl hold() counts its lease lost: 2 % of the ttl plus 10 ms.
// - The 2 % covers the rates of storage's clock, which measures the ttl, and the local steady
//   clock, which measures the deadline. Crystal tolerance and NTP's slewing (at most 0.05 %) keep
//   them far closer; the rest is room for badly kept virtual machine clocks.
// - The 10 ms covers the deadline's timer firing late on a busy executor and the loss reaching the
//   body (its cancellation, or lost() turning true).
// A step of storage's clock is no rate: a step forward shortens the lease by its size, which no
// local deadline can see.
inline milliseconds hold_margin(milliseconds ttl) {
  return ttl / 50 + milliseconds(10);
}

// The renewal interval when none is set: a third of the ttl, so two renewals can fail or come late
// before the deadline.
inline milliseconds default_renew_every(milliseconds ttl) {
  return ttl / 3;
}

// Throws InvalidArgumentError unless a ttl (already in range) leaves time before the deadline and,
// when hold() renews, the interval is positive and due before the deadline.
inline void validate_hold_timing(milliseconds ttl, std::optional<milliseconds> renew_every) {
  const milliseconds usable = ttl - hold_margin(ttl);
  if (usable <= milliseconds::zero())
    throw InvalidArgumentError(
        fmt::format("hold() needs a ttl above its margin of 2 % + 10 ms, got {} ms", ttl.count()));
  if (renew_every && (*renew_every <= milliseconds::zero() || *renew_every >= usable))
    throw InvalidArgumentError(fmt::format(
        "renew_every must be positive and shorter than the ttl less hold()'s margin ({} ms of a "
        "{} ms ttl), got {} ms",
        usable.count(), ttl.count(), renew_every->count()));
}

// Why the deadline passed.
enum class HoldLoss {
  unrenewed,   // nothing renewed the lease: hold() does not renew, or no renewal was sent in time
  unanswered,  // a renewal was sent and its reply had not come
  failing,     // the last renewal failed (and none succeeded since)
};

// One held lease's schedule. Not synchronized: HoldState guards it.
class HoldDeadline {
 public:
  // The lease was acquired by a call sent at `sent` and answered with `ttl`; it is renewed every
  // `renew_every`, or never if that is empty.
  HoldDeadline(steady_time sent, milliseconds ttl, std::optional<milliseconds> renew_every)
      : deadline_(sent + ttl - hold_margin(ttl)),
        every_(renew_every),
        next_renewal_(renew_every ? sent + *renew_every : steady_time::max()) {}

  // From this moment on the lease counts as lost.
  steady_time deadline() const { return deadline_; }
  bool passed(steady_time now) const { return now >= deadline_; }
  // When the next renewal is due (steady_time::max() when hold() does not renew).
  steady_time next_renewal() const { return next_renewal_; }

  // A renewal is sent now.
  void sending() { in_flight_ = true; }
  // The renewal sent at `sent` was answered at `now` with `ttl`: true if that keeps the lease,
  // false if the deadline had passed first (a late success does not undo a loss).
  bool renewed(steady_time sent, milliseconds ttl, steady_time now) {
    in_flight_ = false;
    if (passed(now)) return false;
    failing_ = false;
    deadline_ = sent + ttl - hold_margin(ttl);
    next_renewal_ = sent + *every_;
    return true;
  }
  // The renewal failed at `now` for a passing reason: retried a quarter interval later while the
  // deadline has not passed (true), or too late (false).
  bool failed(steady_time now) {
    in_flight_ = false;
    failing_ = true;
    if (passed(now)) return false;
    next_renewal_ = now + std::max(*every_ / 4, milliseconds(1));
    return true;
  }

  HoldLoss why() const {
    if (failing_) return HoldLoss::failing;
    return in_flight_ ? HoldLoss::unanswered : HoldLoss::unrenewed;
  }

 private:
  steady_time deadline_;
  std::optional<milliseconds> every_;
  steady_time next_renewal_;
  bool in_flight_ = false;
  bool failing_ = false;
};

}  // namespace statepact::detail
