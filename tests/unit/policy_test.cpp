#include <catch2/catch.hpp>

#include <statepact/detail/fingerprint.hpp>
#include <statepact/retry.hpp>
#include <statepact/session_options.hpp>

namespace sp = statepact;
using namespace std::chrono_literals;

TEST_CASE("backoff: exponential ceiling with a cap, full jitter below it", "[unit][retry]") {
  sp::RetryPolicy p;
  CHECK(p.max_attempts() == 5);
  CHECK(sp::detail::backoff_ceiling(1, 10ms, 2.0, 1000ms) == 10ms);
  CHECK(sp::detail::backoff_ceiling(4, 10ms, 2.0, 1000ms) == 80ms);
  CHECK(sp::detail::backoff_ceiling(20, 10ms, 2.0, 1000ms) == 1000ms);
  CHECK(p.delay(3, 0.0) == 0ms);
  CHECK(p.delay(3, 0.999999) == 40ms);
  CHECK(p.delay(3, 0.5) == 20ms);
  for (int i = 0; i < 1000; ++i) CHECK(p.delay(10) <= 1000ms);
  CHECK_THROWS_AS(sp::RetryPolicy().max_attempts(0), sp::InvalidArgumentError);
  CHECK_THROWS_AS(sp::RetryPolicy().multiplier(0.5), sp::InvalidArgumentError);
  CHECK_THROWS_AS(sp::RetryPolicy().initial_backoff(-1ms), sp::InvalidArgumentError);
}

TEST_CASE("session options: normalized, with clear errors", "[unit][session-options]") {
  auto n = sp::SessionOptions("agent")
               .resource("b")
               .resource("a")
               .resource("b")
               .fence("a", 3)
               .normalized();
  CHECK(n.resources() == std::vector<std::string>{"a", "b"});
  REQUIRE(n.fences().size() == 1);
  CHECK(n.isolation() == sp::Isolation::optimistic);
  auto single = sp::SessionOptions("agent").resource("job").fence(7).normalized();
  REQUIRE(single.fences().size() == 1);
  CHECK(single.fences()[0].resource == "job");
  CHECK(single.fences()[0].token == 7);
  CHECK_THROWS_AS(sp::SessionOptions("agent").normalized(), sp::InvalidArgumentError);
  CHECK_THROWS_AS(sp::SessionOptions("").resource("r").normalized(), sp::InvalidArgumentError);
  CHECK_THROWS_AS(sp::SessionOptions("a").resource("r").resource("s").fence(1).normalized(),
                  sp::InvalidArgumentError);
  CHECK_THROWS_AS(sp::SessionOptions("a").resource("r").fence("s", 1).normalized(),
                  sp::InvalidArgumentError);
  CHECK_THROWS_AS(sp::SessionOptions("a").resource("r").fence("r", 1).fence("r", 2).normalized(),
                  sp::InvalidArgumentError);
  CHECK_THROWS_AS(sp::SessionOptions("a").resource("r").lock_timeout(0ms).normalized(),
                  sp::InvalidArgumentError);
  CHECK_THROWS_AS(sp::SessionOptions("a").resource("r").idempotency_key("").normalized(),
                  sp::InvalidArgumentError);
}

TEST_CASE("session options: a setter after normalize() is checked again",
          "[unit][session-options]") {
  auto options = sp::SessionOptions("agent").resource("b").resource("a");
  options.normalize();
  options.normalize();  // a second call changes nothing
  CHECK(options.resources() == std::vector<std::string>{"a", "b"});
  options.resource("a").lock_timeout(0ms);
  CHECK_THROWS_AS(options.normalize(), sp::InvalidArgumentError);
  CHECK(options.resources() == std::vector<std::string>{"a", "b", "a"});  // unchanged by the throw
  options.lock_timeout(10ms);
  options.normalize();
  CHECK(options.resources() == std::vector<std::string>{"a", "b"});
}

TEST_CASE("fingerprints ignore order and tell different writes apart", "[unit][idempotency]") {
  std::vector<sp::WriteOp> w1{{"r", "a", sp::Value(1)}, {"s", "b", std::nullopt}};
  std::vector<sp::WriteOp> w2{{"s", "b", std::nullopt}, {"r", "a", sp::Value(1)}};
  std::vector<sp::WriteOp> w3{{"r", "a", sp::Value(2)}, {"s", "b", std::nullopt}};
  std::vector<sp::WriteOp> w4{{"r", "a", sp::Value(1)}, {"s", "b", sp::Value(nullptr)}};
  const std::vector<std::string> rs{"r", "s"}, sr{"s", "r"};
  CHECK(sp::detail::fingerprint(rs, w1) == sp::detail::fingerprint(sr, w2));
  CHECK(sp::detail::fingerprint(rs, w1) != sp::detail::fingerprint(rs, w3));
  CHECK(sp::detail::fingerprint(rs, w1) != sp::detail::fingerprint(rs, w4));  // erase != null
  CHECK(sp::detail::fingerprint(rs, w1).size() == 32);
}
