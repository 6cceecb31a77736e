// LeaseManager as the one lease entry point, on any backend: lease() registers the resource (and
// sets a policy), try_acquire() is empty only while another owner holds the lease, and every other
// error still reaches the caller.
#pragma once

#include <optional>
#include <string>

#include <catch2/catch.hpp>

#include "../support/expect.hpp"
#include "../support/faulty_backend.hpp"
#include "../support/run.hpp"
#include "fixture.hpp"

namespace sp = statepact;

namespace lease_api_test {

// Storage that cannot be reached when a lease is asked for; everything else passes through.
template <sp::Backend Inner>
struct AcquireUnavailable : sp::test::FaultyBackend<Inner> {
  using sp::test::FaultyBackend<Inner>::FaultyBackend;
  asio::awaitable<sp::Lease> acquire_lease(std::string, std::string, sp::milliseconds) {
    throw sp::BackendUnavailableError("test: the server is down");
    co_return sp::Lease{};
  }
};

}  // namespace lease_api_test

TEMPLATE_LIST_TEST_CASE("lease() registers a new resource and sets a given policy",
                        "[conformance][lease-api]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    TestType fx(ex);
    sp::LeaseManager<typename TestType::backend_type> leases(fx.backend(), 30s);
    const auto r = fx.resource("lease-api-new");
    auto before = co_await sp::test::thrown<sp::ResourceNotFoundError>(
        [&] { return fx.backend().resource_policy(r); });
    CHECK(before);  // not there until lease() registers it

    const sp::Lease lease = co_await leases.lease(r, "worker-a", 30s);
    CHECK(lease.token == 1);
    const sp::ResourcePolicy registered = co_await fx.backend().resource_policy(r);
    CHECK_FALSE(registered.fence_required);
    CHECK(co_await leases.current_fence(r) == 1);

    // A resource that existed before gets the policy lease() is given.
    const auto r2 = fx.resource("lease-api-policy");
    auto created = co_await fx.backend().register_resource(r2, sp::Value::object());
    CHECK(created);
    sp::ResourcePolicy fenced;
    fenced.fence_required = true;
    const sp::Lease second = co_await leases.lease(r2, "worker-a", 30s, fenced);
    CHECK(second.token == 1);
    const sp::ResourcePolicy now = co_await fx.backend().resource_policy(r2);
    CHECK(now.fence_required);

    const sp::Lease renewed = co_await leases.renew(second);
    CHECK(renewed.token == second.token);
    auto released = co_await leases.release(renewed);
    CHECK(released);
  });
}

TEMPLATE_LIST_TEST_CASE("try_acquire is empty while another owner holds the lease",
                        "[conformance][lease-api]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    TestType fx(ex);
    sp::LeaseManager<typename TestType::backend_type> leases(fx.backend(), 30s);
    const auto r = fx.resource("lease-api-try");
    const std::optional<sp::Lease> a = co_await leases.try_acquire(r, "worker-a");
    REQUIRE(a);
    CHECK(a->token == 1);
    CHECK(a->ttl == 30s);  // the manager's default ttl
    const sp::ResourcePolicy registered = co_await fx.backend().resource_policy(r);
    CHECK_FALSE(registered.fence_required);

    const std::optional<sp::Lease> b = co_await leases.try_acquire(r, "worker-b", 30s);
    CHECK_FALSE(b);
    const std::optional<sp::Lease> again = co_await leases.try_acquire(r, "worker-a", 30s);
    REQUIRE(again);
    CHECK(again->token == 1);  // its own live lease: extended, same token

    auto released = co_await leases.release(*again);
    CHECK(released);
    const std::optional<sp::Lease> c = co_await leases.try_acquire(r, "worker-b", 30s);
    REQUIRE(c);
    CHECK(c->token == 2);
    CHECK(co_await leases.current_fence(r) == 2);
  });
}

TEMPLATE_LIST_TEST_CASE(
    "try_acquire and acquire throw every error but a lease held by another owner",
    "[conformance][lease-api]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    TestType fx(ex);
    sp::LeaseManager<typename TestType::backend_type> leases(fx.backend(), 30s);
    const auto r = fx.resource("lease-api-errors");
    auto no_owner = co_await sp::test::thrown<sp::InvalidArgumentError>(
        [&] { return leases.try_acquire(r, "", 30s); });
    CHECK(no_owner);
    auto no_ttl = co_await sp::test::thrown<sp::InvalidArgumentError>(
        [&] { return leases.try_acquire(r, "worker-a", 0ms); });
    CHECK(no_ttl);
    // A wait past the longest lease would overflow the deadline; a negative one means nothing.
    auto endless = co_await sp::test::thrown<sp::InvalidArgumentError>(
        [&] { return leases.acquire(r, "worker-a", 30s, sp::milliseconds::max()); });
    CHECK(endless);
    auto negative = co_await sp::test::thrown<sp::InvalidArgumentError>(
        [&] { return leases.acquire(r, "worker-a", 30s, -1ms); });
    CHECK(negative);
    // Bad input changed nothing: the resource was not registered.
    auto missing = co_await sp::test::thrown<sp::ResourceNotFoundError>(
        [&] { return fx.backend().resource_policy(r); });
    CHECK(missing);

    using Inner = typename TestType::backend_type;
    lease_api_test::AcquireUnavailable<Inner> down(fx.backend());
    sp::LeaseManager<lease_api_test::AcquireUnavailable<Inner>> unreachable(down, 30s);
    auto unavailable = co_await sp::test::thrown<sp::BackendUnavailableError>(
        [&] { return unreachable.try_acquire(r, "worker-a"); });
    CHECK(unavailable);
  });
}
