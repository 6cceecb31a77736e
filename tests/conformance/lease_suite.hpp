// Leases and fencing: every rule of the lease model and its failure-modes table, for any backend.
// Include after defining `ConformanceFixtures` (a std::tuple of fixtures, see fixture.hpp).
#pragma once

#include <string>

#include <catch2/catch.hpp>

#include "../support/expect.hpp"
#include "../support/run.hpp"
#include "fixture.hpp"

namespace sp = statepact;
using sp::test::thrown;

TEMPLATE_LIST_TEST_CASE("tokens start at 1, grow, and are never reused", "[conformance][lease]",
                        ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    TestType fx(ex);
    auto& b = fx.backend();
    const auto r = fx.resource("job-42");
    auto awaited1 = co_await b.current_fence(r);
    CHECK(awaited1 == 0);
    auto a = co_await b.acquire_lease(r, "worker-a", 30s);
    CHECK(a.token == 1);
    CHECK(a.owner == "worker-a");
    CHECK(a.resource == r);
    CHECK(a.ttl == 30s);
    auto awaited2 = co_await b.release_lease(a);
    CHECK(awaited2);
    auto awaited3 = co_await b.current_fence(r);
    CHECK(awaited3 == 1);  // release keeps the high-water mark
    auto again = co_await b.acquire_lease(r, "worker-a", 30s);
    CHECK(again.token == 2);  // even the same owner gets a new token after release
    auto e = co_await b.acquire_lease(r, "worker-a", fx.short_ttl());
    CHECK(e.token == 2);
    co_await fx.advance(fx.short_ttl() + 50ms);
    auto c = co_await b.acquire_lease(r, "worker-c", 30s);
    CHECK(c.token == 3);  // after expiry, strictly higher
    auto awaited4 = co_await b.current_fence(r);
    CHECK(awaited4 == 3);
  });
}

TEMPLATE_LIST_TEST_CASE("same owner re-acquiring a live lease extends it and keeps the token",
                        "[conformance][lease]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    TestType fx(ex);
    auto& b = fx.backend();
    const auto r = fx.resource("extend");
    auto first = co_await b.acquire_lease(r, "worker-a", 10s);
    co_await fx.advance(20ms);
    auto second = co_await b.acquire_lease(r, "worker-a", 20s);
    CHECK(second.token == first.token);
    CHECK(second.ttl == 20s);
    CHECK(second.expires_at > first.expires_at);
    auto awaited5 = co_await b.current_fence(r);
    CHECK(awaited5 == first.token);
  });
}

TEMPLATE_LIST_TEST_CASE(
    "same owner re-acquiring an expired lease gets a new token, and its old token is fenced off",
    "[conformance][lease][fence]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    TestType fx(ex);
    auto& b = fx.backend();
    sp::Manager<B> manager(b);
    const auto r = fx.resource("reacquire-expired");
    auto first = co_await manager.lease(r, "worker-a", fx.short_ttl());
    co_await fx.advance(fx.short_ttl() + 50ms);
    // Before the new token exists the expired one still writes (nobody superseded it).
    {
      auto s = co_await manager.session(sp::SessionOptions("worker-a").resource(r).fence(first));
      co_await s.write("step", 1);
      co_await s.commit();
    }
    auto second = co_await b.acquire_lease(r, "worker-a", 30s);
    CHECK(second.token == first.token + 1);  // not an extension: the old lease had expired
    CHECK(second.owner == "worker-a");
    auto fence = co_await b.current_fence(r);
    CHECK(fence == second.token);
    {  // the same owner's commit under its old token is refused, and nothing of it lands
      auto s = co_await manager.session(sp::SessionOptions("worker-a").resource(r).fence(first));
      co_await s.write("step", 2);
      auto lost = co_await thrown<sp::LeaseLostError>([&] { return s.commit(); });
      REQUIRE(lost);
      CHECK(lost->token() == first.token);
      CHECK(lost->current_fence() == second.token);
    }
    auto renewed_old =
        co_await thrown<sp::LeaseLostError>([&] { return b.renew_lease(first, std::nullopt); });
    CHECK(renewed_old);
    auto step = co_await b.read(r, "step");
    CHECK(step.value == sp::Value(1));
    CHECK(step.version == 1);
    {  // under the new token it writes
      auto s = co_await manager.session(sp::SessionOptions("worker-a").resource(r).fence(second));
      co_await s.write("step", 3);
      co_await s.commit();
    }
    auto step3 = co_await b.read(r, "step");
    CHECK(step3.value == sp::Value(3));
  });
}

TEMPLATE_LIST_TEST_CASE("another owner cannot take a live lease", "[conformance][lease]",
                        ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    TestType fx(ex);
    auto& b = fx.backend();
    const auto r = fx.resource("busy");
    auto a = co_await b.acquire_lease(r, "worker-a", 30s);
    auto err = co_await thrown<sp::LeaseNotAvailableError>(
        [&] { return b.acquire_lease(r, "worker-b", 30s); });
    REQUIRE(err);
    CHECK(err->holder() == "worker-a");
    CHECK(err->holder_token() == a.token);
    CHECK(err->holder_expires_at() == a.expires_at);
    CHECK(!err->retryable());
    CHECK(std::string(err->what()).find("worker-b") != std::string::npos);
    auto awaited6 = co_await b.current_fence(r);
    CHECK(awaited6 == a.token);                              // the refusal issued nothing
    auto renewed = co_await b.renew_lease(a, std::nullopt);  // and the holder is untouched
    CHECK(renewed.token == a.token);
  });
}

TEMPLATE_LIST_TEST_CASE("renew extends only the live lease of its owner", "[conformance][lease]",
                        ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    TestType fx(ex);
    auto& b = fx.backend();
    const auto r = fx.resource("renew");
    auto a = co_await b.acquire_lease(r, "worker-a", 30s);
    auto longer = co_await b.renew_lease(a, 60s);
    CHECK(longer.token == a.token);
    CHECK(longer.ttl == 60s);
    CHECK(longer.expires_at > a.expires_at);
    auto same_ttl = co_await b.renew_lease(longer, std::nullopt);
    CHECK(same_ttl.ttl == 60s);

    // Expired, even though nobody took it: cannot be renewed.
    auto s = co_await b.acquire_lease(fx.resource("renew-expired"), "worker-a", fx.short_ttl());
    co_await fx.advance(fx.short_ttl() + 50ms);
    auto expired =
        co_await thrown<sp::LeaseLostError>([&] { return b.renew_lease(s, std::nullopt); });
    REQUIRE(expired);
    CHECK(!expired->retryable());
    CHECK(expired->token() == s.token);

    // Superseded by a newer owner.
    auto t = co_await b.acquire_lease(fx.resource("renew-superseded"), "worker-a", fx.short_ttl());
    co_await fx.advance(fx.short_ttl() + 50ms);
    auto newer = co_await b.acquire_lease(t.resource, "worker-b", 30s);
    auto superseded =
        co_await thrown<sp::LeaseLostError>([&] { return b.renew_lease(t, std::nullopt); });
    REQUIRE(superseded);
    CHECK(superseded->current_fence() == newer.token);

    // Released.
    auto u = co_await b.acquire_lease(fx.resource("renew-released"), "worker-a", 30s);
    auto awaited7 = co_await b.release_lease(u);
    CHECK(awaited7);
    auto awaited8 =
        co_await thrown<sp::LeaseLostError>([&] { return b.renew_lease(u, std::nullopt); });
    CHECK(awaited8);

    // A forged lease of another owner with the live token.
    auto forged = longer;
    forged.owner = "mallory";
    auto awaited9 =
        co_await thrown<sp::LeaseLostError>([&] { return b.renew_lease(forged, std::nullopt); });
    CHECK(awaited9);

    // A lease of a resource never leased here (kept from a store since wiped, or made up): lost as
    // released, and nothing newer was issued.
    sp::Lease never{fx.resource("renew-never-leased"), "worker-a", 7, longer.expires_at, 30s};
    auto awaited10 =
        co_await thrown<sp::LeaseLostError>([&] { return b.renew_lease(never, std::nullopt); });
    REQUIRE(awaited10);
    CHECK(awaited10->current_fence() == 0);
    CHECK(std::string(awaited10->what()).find("released") != std::string::npos);
  });
}

TEMPLATE_LIST_TEST_CASE("release answers whether it released, and keeps the high-water mark",
                        "[conformance][lease]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    TestType fx(ex);
    auto& b = fx.backend();
    const auto r = fx.resource("release");
    auto a = co_await b.acquire_lease(r, "worker-a", fx.short_ttl());
    auto not_owner = a;
    not_owner.owner = "worker-b";
    auto awaited10 = co_await b.release_lease(not_owner);
    CHECK_FALSE(awaited10);
    co_await fx.advance(fx.short_ttl() + 50ms);
    auto bl = co_await b.acquire_lease(r, "worker-b", 30s);
    auto awaited11 = co_await b.release_lease(a);
    CHECK_FALSE(awaited11);  // stale token: not the current owner
    auto awaited12 = co_await b.release_lease(bl);
    CHECK(awaited12);
    auto awaited13 = co_await b.release_lease(bl);
    CHECK_FALSE(awaited13);  // already released
    auto awaited14 = co_await b.current_fence(r);
    CHECK(awaited14 == bl.token);
    auto never = sp::Lease{fx.resource("never-leased"), "worker-a", 1, {}, 30s};
    auto awaited15 = co_await b.release_lease(never);
    CHECK_FALSE(awaited15);
    auto c = co_await b.acquire_lease(r, "worker-c", 30s);
    CHECK(c.token == bl.token + 1);
  });
}

TEMPLATE_LIST_TEST_CASE("guard asks storage whether a newer token exists", "[conformance][lease]",
                        ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    TestType fx(ex);
    sp::LeaseManager<typename TestType::backend_type> leases(fx.backend(), 30s);
    const auto r = fx.resource("guard");
    auto a = co_await fx.backend().acquire_lease(r, "worker-a", fx.short_ttl());
    co_await leases.guard(a);
    co_await fx.advance(fx.short_ttl() + 50ms);
    co_await leases.guard(a);  // expired but not superseded: still the newest token
    auto bl = co_await fx.backend().acquire_lease(r, "worker-b", 30s);
    auto lost = co_await thrown<sp::LeaseLostError>([&] { return leases.guard(a); });
    REQUIRE(lost);
    CHECK(lost->current_fence() == bl.token);
    auto forged = bl;
    forged.token = bl.token + 5;
    auto awaited16 =
        co_await thrown<sp::InvalidArgumentError>([&] { return leases.guard(forged); });
    CHECK(awaited16);
  });
}

TEMPLATE_LIST_TEST_CASE("storage enforces the fence atomically with the commit",
                        "[conformance][lease][fence]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    TestType fx(ex);
    sp::Manager<B> manager(fx.backend());
    const auto r = fx.resource("job-fenced");
    auto a = co_await manager.lease(r, "worker-a", fx.short_ttl());  // registers the resource
    {
      auto s = co_await manager.session(sp::SessionOptions("worker-a").resource(r).fence(a.token));
      co_await s.write("status", "running");
      auto res = co_await s.commit();
      CHECK(res.versions.at(r) == 1);
    }
    // Expired but not superseded: the paused owner may still write (standard fencing model).
    co_await fx.advance(fx.short_ttl() + 50ms);
    {
      auto s = co_await manager.session(sp::SessionOptions("worker-a").resource(r).fence(a.token));
      co_await s.write("status", "still-running");
      co_await s.commit();
    }
    // Takeover: now the old token is fenced off and nothing of its commit lands.
    auto bl = co_await manager.lease(r, "worker-b", 30s);
    CHECK(bl.token == a.token + 1);
    {
      auto s = co_await manager.session(sp::SessionOptions("worker-b").resource(r).fence(bl));
      co_await s.write("status", "done");
      co_await s.commit();
    }
    {
      auto s = co_await manager.session(sp::SessionOptions("worker-a").resource(r).fence(a.token));
      co_await s.write("status", "running");
      co_await s.write("extra", 1);
      auto lost = co_await thrown<sp::LeaseLostError>([&] { return s.commit(); });
      REQUIRE(lost);
      CHECK(lost->token() == a.token);
      CHECK(lost->current_fence() == bl.token);
      CHECK(!lost->retryable());
    }
    auto status = co_await fx.backend().read(r, "status");
    CHECK(status.value == sp::Value("done"));
    CHECK(status.version == 3);
    auto awaited17 = co_await fx.backend().read(r, "extra");
    CHECK(!(awaited17).value);
    // A token never issued is a forgery, not a stale token.
    {
      auto s =
          co_await manager.session(sp::SessionOptions("worker-b").resource(r).fence(bl.token + 1));
      co_await s.write("status", "forged");
      auto awaited18 = co_await thrown<sp::InvalidArgumentError>([&] { return s.commit(); });
      CHECK(awaited18);
    }
    auto awaited19 = co_await fx.backend().read(r, "status");
    CHECK((awaited19).version == 3);
  });
}

TEMPLATE_LIST_TEST_CASE("manager.lease registers the resource, and sessions need a registered one",
                        "[conformance][lease]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    TestType fx(ex);
    sp::Manager<B> manager(fx.backend());
    const auto missing = fx.resource("not-registered");
    auto awaited20 = co_await thrown<sp::ResourceNotFoundError>(
        [&] { return manager.session(sp::SessionOptions("agent").resource(missing)); });
    CHECK(awaited20);
    const auto r = fx.resource("auto-registered");
    auto awaited21 = co_await manager.register_resource(r, sp::Value::object());
    CHECK(awaited21);
    auto awaited22 = co_await manager.register_resource(r, sp::Value::object());
    CHECK_FALSE(awaited22);
    const auto r2 = fx.resource("lease-registers");
    co_await manager.lease(r2, "worker-a", 30s);
    auto s = co_await manager.session(sp::SessionOptions("worker-a").resource(r2));
    auto awaited23 = co_await s.read("anything");
    CHECK(!(awaited23));
    // An existing resource keeps its state when registered again.
    sp::Value init = sp::Value::object();
    init["stock"] = 5;
    const auto r3 = fx.resource("initial-state");
    auto awaited24 = co_await manager.register_resource(r3, init);
    CHECK(awaited24);
    init["stock"] = 9;
    auto awaited25 = co_await manager.register_resource(r3, init);
    CHECK_FALSE(awaited25);
    auto awaited26 = co_await fx.backend().read(r3, "stock");
    CHECK((awaited26).value == sp::Value(5));
  });
}

TEMPLATE_LIST_TEST_CASE("bad input is rejected before any I/O and changes nothing",
                        "[conformance][lease][validation]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    TestType fx(ex);
    auto& b = fx.backend();
    sp::Manager<B> manager(b);
    const auto r = fx.resource("validated");
    auto a = co_await manager.lease(r, "worker-a", 30s);
    const std::string bad_names[] = {"",
                                     std::string(257, 'x'),
                                     "bad\xff"
                                     "utf8",
                                     "over\xc0\xaflong",
                                     "tab\there",
                                     "nul" + std::string(1, '\0') + "x",
                                     "del\x7f",
                                     "c1\xc2\x85"};
    for (const auto& bad : bad_names) {
      auto awaited27 =
          co_await thrown<sp::InvalidArgumentError>([&] { return b.acquire_lease(bad, "o", 30s); });
      CHECK(awaited27);
      auto awaited28 =
          co_await thrown<sp::InvalidArgumentError>([&] { return b.acquire_lease(r, bad, 30s); });
      CHECK(awaited28);
      auto awaited29 =
          co_await thrown<sp::InvalidArgumentError>([&] { return manager.lease(r, bad, 30s); });
      CHECK(awaited29);
      auto awaited30 =
          co_await thrown<sp::InvalidArgumentError>([&] { return b.current_fence(bad); });
      CHECK(awaited30);
      auto awaited31 = co_await thrown<sp::InvalidArgumentError>(
          [&] { return b.register_resource(bad, sp::Value::object()); });
      CHECK(awaited31);
      auto awaited32 = co_await thrown<sp::InvalidArgumentError>(
          [&] { return manager.session(sp::SessionOptions(bad).resource(r)); });
      CHECK(awaited32);
      auto s = co_await manager.session(sp::SessionOptions("agent").resource(r));
      auto awaited33 = co_await thrown<sp::InvalidArgumentError>([&] { return s.write(bad, 1); });
      CHECK(awaited33);
      auto awaited34 = co_await thrown<sp::InvalidArgumentError>([&] { return s.read(bad); });
      CHECK(awaited34);
      CHECK(s.active());  // a rejected call leaves the session usable
    }
    const sp::milliseconds bad_ttls[] = {0ms, -5ms, std::chrono::hours(24 * 7) + 1ms,
                                         std::chrono::hours(24 * 365)};
    for (auto ttl : bad_ttls) {
      auto awaited35 = co_await thrown<sp::InvalidArgumentError>(
          [&] { return b.acquire_lease(r, "worker-a", ttl); });
      CHECK(awaited35);
      auto awaited36 =
          co_await thrown<sp::InvalidArgumentError>([&] { return b.renew_lease(a, ttl); });
      CHECK(awaited36);
      auto awaited37 = co_await thrown<sp::InvalidArgumentError>(
          [&] { return manager.lease(fx.resource("never-made"), "o", ttl); });
      CHECK(awaited37);
    }
    // The longest allowed ttl is accepted.
    auto week = co_await b.acquire_lease(fx.resource("week"), "o", std::chrono::hours(24 * 7));
    CHECK(week.token == 1);
    // Nothing above changed the lease, the token counter or the registry.
    auto awaited38 = co_await b.current_fence(r);
    CHECK(awaited38 == a.token);
    auto still = co_await b.renew_lease(a, std::nullopt);
    CHECK(still.token == a.token);
    auto awaited39 = co_await b.current_fence(fx.resource("never-made"));
    CHECK(awaited39 == 0);
    auto awaited40 = co_await thrown<sp::ResourceNotFoundError>([&] {
      return manager.session(sp::SessionOptions("agent").resource(fx.resource("never-made")));
    });
    CHECK(awaited40);
    // Register with a non-object state.
    auto awaited41 = co_await thrown<sp::InvalidArgumentError>(
        [&] { return b.register_resource(fx.resource("not-object"), sp::Value(3)); });
    CHECK(awaited41);
    auto awaited42 = co_await thrown<sp::ResourceNotFoundError>([&] {
      return manager.session(sp::SessionOptions("agent").resource(fx.resource("not-object")));
    });
    CHECK(awaited42);
    // A valid multi-byte UTF-8 name is fine.
    auto u = co_await b.acquire_lease(fx.resource("заказ-42-✓"), "работник", 30s);
    CHECK(u.token == 1);
  });
}
