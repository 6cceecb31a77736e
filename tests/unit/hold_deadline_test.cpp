// hold()'s local deadline and renewal schedule, decided without a clock, a timer or storage.
#include <catch2/catch.hpp>

#include <exception>
#include <stdexcept>
#include <string>

#include <statepact/detail/hold_deadline.hpp>
#include <statepact/detail/hold_state.hpp>

namespace sp = statepact;
using namespace std::chrono_literals;
using sp::detail::HoldDeadline;
using sp::detail::HoldLoss;

namespace {
const sp::detail::steady_time t0 = sp::detail::steady_time(std::chrono::hours(1000));
}

TEST_CASE("hold deadline: counted from the send, less 2 % of the ttl and 10 ms",
          "[unit][hold-deadline]") {
  CHECK(sp::detail::hold_margin(30s) == 610ms);
  CHECK(sp::detail::hold_margin(1s) == 30ms);
  const HoldDeadline d(t0, 30s, std::nullopt);
  CHECK(d.deadline() == t0 + 30s - 610ms);
  CHECK_FALSE(d.passed(t0 + 29389ms));
  CHECK(d.passed(t0 + 29390ms));
  CHECK(d.next_renewal() == sp::detail::steady_time::max());  // hold() without auto_renew
  CHECK(d.why() == HoldLoss::unrenewed);
}

TEST_CASE("hold deadline: renewals every third of the ttl by default, from each send",
          "[unit][hold-deadline]") {
  CHECK(sp::detail::default_renew_every(30s) == 10s);
  CHECK(sp::detail::default_renew_every(900ms) == 300ms);
  HoldDeadline d(t0, 30s, sp::detail::default_renew_every(30s));
  CHECK(d.next_renewal() == t0 + 10s);
  // Sent late (the timer fired late), answered later still: the schedule counts from the send.
  d.sending();
  CHECK(d.why() == HoldLoss::unanswered);
  REQUIRE(d.renewed(t0 + 10100ms, 30s, t0 + 12s));
  CHECK(d.deadline() == t0 + 10100ms + 30s - 610ms);
  CHECK(d.next_renewal() == t0 + 20100ms);
  CHECK(d.why() == HoldLoss::unrenewed);
}

TEST_CASE("hold deadline: a reply after the deadline does not undo the loss",
          "[unit][hold-deadline]") {
  HoldDeadline d(t0, 1s, 300ms);
  d.sending();
  // A renewal sent at 300 ms was applied, but its answer came after 970 ms: lost, deadline kept.
  CHECK_FALSE(d.renewed(t0 + 300ms, 1s, t0 + 970ms));
  CHECK(d.deadline() == t0 + 970ms);
  CHECK(d.passed(t0 + 970ms));
}

TEST_CASE("hold deadline: a failed renewal is retried sooner and the deadline stays",
          "[unit][hold-deadline]") {
  HoldDeadline d(t0, 1200ms, 400ms);
  d.sending();
  REQUIRE(d.failed(t0 + 500ms));
  CHECK(d.why() == HoldLoss::failing);
  CHECK(d.next_renewal() == t0 + 600ms);  // a quarter of the interval later
  CHECK(d.deadline() == t0 + 1200ms - 34ms);
  d.sending();  // the retry, in flight: still failing until one succeeds
  CHECK(d.why() == HoldLoss::failing);
  CHECK_FALSE(d.failed(t0 + 1166ms));  // too late to retry
  HoldDeadline e(t0, 1200ms, 400ms);
  e.sending();
  REQUIRE(e.failed(t0 + 500ms));
  e.sending();
  REQUIRE(e.renewed(t0 + 600ms, 1200ms, t0 + 700ms));  // a success ends the failing
  CHECK(e.why() == HoldLoss::unrenewed);
  CHECK(e.deadline() == t0 + 1800ms - 34ms);
}

TEST_CASE("hold deadline: a ttl must exceed the margin, an interval must fall before it",
          "[unit][hold-deadline]") {
  using sp::detail::validate_hold_timing;
  CHECK_THROWS_AS(validate_hold_timing(10ms, std::nullopt), sp::InvalidArgumentError);
  CHECK_NOTHROW(validate_hold_timing(11ms, std::nullopt));
  CHECK_NOTHROW(validate_hold_timing(30s, 10s));
  CHECK_NOTHROW(validate_hold_timing(1s, 969ms));
  CHECK_THROWS_AS(validate_hold_timing(1s, 970ms), sp::InvalidArgumentError);  // never in time
  CHECK_THROWS_AS(validate_hold_timing(1s, 1s), sp::InvalidArgumentError);
  CHECK_THROWS_AS(validate_hold_timing(1s, 0ms), sp::InvalidArgumentError);
}

TEST_CASE("hold state: the deadline's loss says why, with the failing renewals' cause nested",
          "[unit][hold-deadline]") {
  const sp::Lease lease{"job", "worker-a", 7, sp::time_point(), 1s};
  sp::detail::HoldState failing(lease, HoldDeadline(t0, 1s, 300ms));
  REQUIRE(failing.sending());
  CHECK(failing.renewal_failed(std::make_exception_ptr(std::runtime_error("LOADING")), t0 + 400ms));
  REQUIRE(failing.sending());  // the retry is in flight when the deadline passes
  CHECK_FALSE(failing.expire(t0 + 969ms));
  REQUIRE(failing.expire(t0 + 970ms));
  CHECK_FALSE(failing.sending());  // nothing more is sent
  CHECK_FALSE(failing.lost(std::make_exception_ptr(std::runtime_error("later"))));  // first wins
  try {
    std::rethrow_exception(failing.failure());
  } catch (const sp::LeaseLostError& e) {
    CHECK(e.token() == 7);
    CHECK(std::string(e.what()).find("LOADING") != std::string::npos);
    CHECK_THROWS_WITH(std::rethrow_if_nested(e), "LOADING");
  }

  sp::detail::HoldState unanswered(lease, HoldDeadline(t0, 1s, 300ms));
  REQUIRE(unanswered.sending());
  REQUIRE(unanswered.expire(t0 + 1s));
  CHECK_FALSE(unanswered.renewed(lease, t0 + 300ms, t0 + 1100ms));  // the late success
  try {
    std::rethrow_exception(unanswered.failure());
  } catch (const sp::LeaseLostError& e) {
    CHECK(std::string(e.what()).find("no renewal was answered") != std::string::npos);
    CHECK_NOTHROW(std::rethrow_if_nested(e));
  }

  sp::detail::HoldState late(lease, HoldDeadline(t0, 1s, std::nullopt));
  CHECK_FALSE(late.answered_late(t0 + 969ms));
  CHECK(late.answered_late(t0 + 970ms));
  CHECK(late.failure());
}
