// The optional InspectableBackend concept (listing, holder, revoke), for any backend that models
// it. Include after defining `ConformanceFixtures` (a std::tuple of fixtures, see fixture.hpp).
#pragma once

#include <algorithm>
#include <string>

#include <catch2/catch.hpp>

#include <statepact/inspect.hpp>

#include "../support/expect.hpp"
#include "../support/run.hpp"
#include "fixture.hpp"

namespace sp = statepact;
using sp::test::thrown;

// Every glob metacharacter of `name` escaped, so the glob matches the name alone.
inline std::string glob_escape(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

TEMPLATE_LIST_TEST_CASE(
    "revoke fences the holder off at once, and the next acquire gets a larger token",
    "[conformance][inspect]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    static_assert(sp::InspectableBackend<B>);
    TestType fx(ex);
    auto& b = fx.backend();
    sp::Manager<B> manager(b);
    const auto r = fx.resource("revoke-me");
    auto a = co_await manager.lease(r, "worker-a", 30s);
    auto revoked = co_await b.revoke_lease(r);
    REQUIRE(revoked);
    CHECK(revoked->lease.owner == "worker-a");
    CHECK(revoked->lease.token == a.token);
    CHECK(revoked->fence == a.token + 1);
    auto fence = co_await b.current_fence(r);
    CHECK(fence == a.token + 1);
    {  // the old holder's fenced commit is refused at once, with nobody having acquired
      auto s = co_await manager.session(sp::SessionOptions("worker-a").resource(r).fence(a));
      co_await s.write("step", 1);
      auto lost = co_await thrown<sp::LeaseLostError>([&] { return s.commit(); });
      REQUIRE(lost);
      CHECK(lost->code() == sp::ErrorCode::lease_lost);
      CHECK(lost->token() == a.token);
      CHECK(lost->current_fence() == a.token + 1);
    }
    auto renewed = co_await thrown<sp::LeaseLostError>([&] { return b.renew_lease(a, 30s); });
    CHECK(renewed);
    auto released = co_await b.release_lease(a);
    CHECK_FALSE(released);
    auto holder = co_await b.lease_holder(r);
    CHECK_FALSE(holder);
    auto entry = co_await b.read(r, "step");
    CHECK(entry.version == 0);  // nothing of the refused commit landed
    auto next = co_await b.acquire_lease(r, "worker-b", 30s);
    CHECK(next.token > revoked->fence);
    {
      auto s = co_await manager.session(sp::SessionOptions("worker-b").resource(r).fence(next));
      co_await s.write("step", 2);
      co_await s.commit();
    }
    // Released: nothing to revoke, and the fence stays.
    co_await b.release_lease(next);
    auto none = co_await b.revoke_lease(r);
    CHECK_FALSE(none);
    auto after = co_await b.current_fence(r);
    CHECK(after == next.token);
    // Expired but not taken over: its holder could still write, so it is revoked too.
    auto c = co_await b.acquire_lease(r, "worker-c", fx.short_ttl());
    co_await fx.advance(fx.short_ttl() + 50ms);
    auto expired = co_await b.revoke_lease(r);
    REQUIRE(expired);
    CHECK(expired->lease.token == c.token);
    auto never = co_await b.revoke_lease(fx.resource("never-leased"));
    CHECK_FALSE(never);
  });
}

TEMPLATE_LIST_TEST_CASE("listing and holder report live leases with the backend's time left",
                        "[conformance][inspect]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    TestType fx(ex);
    auto& b = fx.backend();
    const std::string tail = glob_escape(fx.resource(""));  // the fixture's unique suffix
    const auto r1 = fx.resource("ls-job-1"), r2 = fx.resource("ls-job-2");
    const auto other = fx.resource("ls-other");
    auto l1 = co_await b.acquire_lease(r1, "worker-a", 30s);
    auto l2 = co_await b.acquire_lease(r2, "worker-b", 20s);
    co_await b.acquire_lease(other, "worker-c", 30s);
    auto listed = co_await b.list_leases("ls-job-?" + tail);
    REQUIRE(listed.size() == 2);
    CHECK(listed[0].resource == r1);
    CHECK(listed[0].owner == "worker-a");
    CHECK(listed[0].token == l1.token);
    CHECK(listed[0].ttl == 30s);
    CHECK(listed[0].expires_in > 25s);
    CHECK(listed[0].expires_in <= 30s);
    CHECK(listed[1].resource == r2);
    CHECK(listed[1].token == l2.token);
    CHECK(listed[1].expires_in <= 20s);
    auto all = co_await b.list_leases(std::nullopt);
    CHECK(std::count_if(all.begin(), all.end(), [&](const sp::LeaseInfo& i) {
            return i.resource == r1 || i.resource == r2 || i.resource == other;
          }) == 3);
    sp::LeaseManager<B> leases(b);
    auto h = co_await leases.holder(r2);
    REQUIRE(h);
    CHECK(h->owner == "worker-b");
    CHECK(h->token == l2.token);
    CHECK(h->expires_in > 15s);
    // An expired lease is no longer listed or held.
    co_await b.acquire_lease(r1, "worker-a", fx.short_ttl());
    co_await fx.advance(fx.short_ttl() + 50ms);
    auto gone = co_await leases.holder(r1);
    CHECK_FALSE(gone);
    auto left = co_await b.list_leases("ls-job-*" + tail);
    REQUIRE(left.size() == 1);
    CHECK(left[0].resource == r2);

    co_await b.register_resource(fx.resource("ls-res-a"), sp::Value::object(),
                                 sp::ResourcePolicy{true});
    co_await b.register_resource(fx.resource("ls-res-b"));
    co_await b.register_resource(fx.resource("ls-zzz"));
    sp::Manager<B> manager(b);
    {
      auto s =
          co_await manager.session(sp::SessionOptions("agent").resource(fx.resource("ls-res-b")));
      co_await s.write("k", 1);
      co_await s.commit();
    }
    auto res = co_await b.list_resources("ls-res-[a-b]" + tail);
    REQUIRE(res.size() == 2);
    CHECK(res[0].name == fx.resource("ls-res-a"));
    CHECK(res[0].policy.fence_required);
    CHECK(res[0].version == 0);
    CHECK(res[1].name == fx.resource("ls-res-b"));
    CHECK_FALSE(res[1].policy.fence_required);
    CHECK(res[1].version == 1);
    auto bad = co_await thrown<sp::InvalidArgumentError>([&] { return b.list_leases("[ab"); });
    CHECK(bad);
  });
}

TEMPLATE_LIST_TEST_CASE("names with odd bytes are listed as they are", "[conformance][inspect]",
                        ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    TestType fx(ex);
    auto& b = fx.backend();
    const auto r = fx.resource("odd {}:*?[x]\\ \xc3\xa9\xe2\x9c\x93 'q\"");
    co_await b.register_resource(r);
    auto l = co_await b.acquire_lease(r, "owner with spaces {}", 30s);
    auto listed = co_await b.list_leases(glob_escape(r));
    REQUIRE(listed.size() == 1);
    CHECK(listed[0].resource == r);
    CHECK(listed[0].owner == "owner with spaces {}");
    CHECK(listed[0].token == l.token);
    auto res = co_await b.list_resources("odd {}:\\*?\\[x]*" + glob_escape(fx.resource("")));
    REQUIRE(res.size() == 1);
    CHECK(res[0].name == r);
    auto revoked = co_await b.revoke_lease(r);
    REQUIRE(revoked);
    CHECK(revoked->lease.resource == r);
  });
}
