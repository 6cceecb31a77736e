#include <catch2/catch.hpp>

#include <statepact/detail/lease_rules.hpp>

namespace sp = statepact;
using namespace std::chrono_literals;
using sp::detail::LeaseState;

namespace {
const sp::time_point t0 = sp::time_point(std::chrono::hours(1000));
}

TEST_CASE("acquire: new token when free, released or expired, and extend for the same owner",
          "[unit][lease-rules]") {
  LeaseState s;
  auto a = sp::detail::decide_acquire(s, "r", "a", 10s, t0);
  CHECK(a.token == 1);
  CHECK(a.expires_at == t0 + 10s);
  auto ext = sp::detail::decide_acquire(s, "r", "a", 20s, t0 + 5s);
  CHECK(ext.token == 1);
  CHECK(ext.expires_at == t0 + 25s);
  CHECK_THROWS_AS(sp::detail::decide_acquire(s, "r", "b", 10s, t0 + 24s),
                  sp::LeaseNotAvailableError);
  CHECK(s.high_water == 1);
  // Expiry is inclusive of the instant itself: at expires_at the lease is gone.
  auto b = sp::detail::decide_acquire(s, "r", "b", 10s, t0 + 25s);
  CHECK(b.token == 2);
  CHECK(sp::detail::decide_release(s, b));
  CHECK(!s.current);
  CHECK(s.high_water == 2);
  auto b2 = sp::detail::decide_acquire(s, "r", "b", 10s, t0 + 26s);
  CHECK(b2.token == 3);
}

TEST_CASE("renew: live, same owner and token only", "[unit][lease-rules]") {
  LeaseState s;
  auto a = sp::detail::decide_acquire(s, "r", "a", 10s, t0);
  auto r = sp::detail::decide_renew(s, a, 30s, t0 + 9s);
  CHECK(r.expires_at == t0 + 39s);
  CHECK_THROWS_AS(sp::detail::decide_renew(s, a, 30s, t0 + 39s), sp::LeaseLostError);
  auto wrong_owner = a;
  wrong_owner.owner = "b";
  CHECK_THROWS_AS(sp::detail::decide_renew(s, wrong_owner, 30s, t0 + 10s), sp::LeaseLostError);
  CHECK(s.current->expires_at == t0 + 39s);  // failures change nothing
}

TEST_CASE("renew: each loss has one name and one message", "[unit][lease-rules]") {
  using sp::detail::LeaseLoss;
  // Each loss's name reads back: tests/unit/verdicts_test.cpp.
  CHECK_FALSE(sp::detail::named<LeaseLoss>("lease was released"));  // words, not English
  const sp::Lease lease{"r", "a", 3, t0, 10s};
  auto message = [&](LeaseLoss l) {
    return std::string(sp::detail::lease_lost(lease, 5, l).what());
  };
  CHECK(message(LeaseLoss::none).find("no lease exists") != std::string::npos);
  CHECK(message(LeaseLoss::superseded).find("superseded by a newer token") != std::string::npos);
  CHECK(message(LeaseLoss::released).find("lease was released") != std::string::npos);
  CHECK(message(LeaseLoss::expired).find("expired before renewal") != std::string::npos);
  const auto lost = sp::detail::lease_lost(lease, 5, LeaseLoss::superseded);
  CHECK(lost.token() == 3);
  CHECK(lost.current_fence() == 5);
  CHECK(lost.owner() == "a");

  // decide_renew names the loss it found.
  LeaseState s;
  auto a = sp::detail::decide_acquire(s, "r", "a", 10s, t0);
  try {
    sp::detail::decide_renew(s, a, 10s, t0 + 10s);
    FAIL("renewed an expired lease");
  } catch (const sp::LeaseLostError& e) {
    CHECK(std::string(e.what()).find("expired before renewal") != std::string::npos);
  }
  auto b = sp::detail::decide_acquire(s, "r", "b", 10s, t0 + 11s);
  try {
    sp::detail::decide_renew(s, a, 10s, t0 + 12s);
    FAIL("renewed a superseded lease");
  } catch (const sp::LeaseLostError& e) {
    CHECK(std::string(e.what()).find("superseded") != std::string::npos);
    CHECK(e.current_fence() == b.token);
  }
}

TEST_CASE("release: only the current owner's own lease", "[unit][lease-rules]") {
  LeaseState s;
  auto a = sp::detail::decide_acquire(s, "r", "a", 10s, t0);
  auto stale = a;
  stale.token = 0;
  CHECK_FALSE(sp::detail::decide_release(s, stale));
  auto other = a;
  other.owner = "b";
  CHECK_FALSE(sp::detail::decide_release(s, other));
  CHECK(sp::detail::decide_release(s, a));
  CHECK_FALSE(sp::detail::decide_release(s, a));
}

TEST_CASE("fence verdicts", "[unit][lease-rules]") {
  using V = sp::detail::FenceVerdict;
  CHECK(sp::detail::check_fence(3, 3) == V::ok);
  CHECK(sp::detail::check_fence(3, 2) == V::stale);
  CHECK(sp::detail::check_fence(3, 4) == V::never_issued);
  CHECK(sp::detail::check_fence(0, 0) == V::never_issued);
  CHECK_THROWS_AS(sp::detail::enforce_fence("r", "a", 3, 2), sp::LeaseLostError);
  CHECK_THROWS_AS(sp::detail::enforce_fence("r", "a", 3, 9), sp::InvalidArgumentError);
}

TEST_CASE("Lease::is_expired is a local check at the given instant", "[unit][lease-rules]") {
  sp::Lease l{"r", "a", 1, t0 + 10s, 10s};
  CHECK(!l.is_expired(t0 + 9999ms));
  CHECK(l.is_expired(t0 + 10s));
}
