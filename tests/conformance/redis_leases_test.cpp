// The conformance suite's lease part, instantiated for the redis backend.
#include <tuple>

#include "redis_fixture.hpp"

using ConformanceFixtures = std::tuple<statepact::test::RedisFixture>;

#include "lease_suite.hpp"

#include "../support/expect.hpp"
#include "../support/run.hpp"

// The URL's parameters reach the backend: one that names timeouts and a client name works, and a
// misspelt parameter is refused when the backend is made, naming the parameter.
TEST_CASE("redis url parameters are accepted, a misspelt one is refused", "[redis][url]") {
  namespace sp = statepact;
  const std::string base = sp::test::redis_test_url();
  const char sep = base.find('?') == std::string::npos ? '?' : '&';
  sp::test::run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::RedisBackend backend(ex, base + sep + "timeout=2s&connect_timeout=1s&name=statepact-url");
    sp::LeaseManager<sp::RedisBackend> leases(backend, 30s);
    sp::test::RedisFixture fx(ex);
    const auto r = fx.resource("url-parameters");
    const sp::Lease lease = co_await leases.lease(r, "worker-a");
    CHECK(lease.token == 1);
    auto released = co_await leases.release(lease);
    CHECK(released);
  });
  asio::io_context io;
  try {
    sp::RedisBackend bad(io.get_executor(), base + sep + "timout=2s");
    FAIL("a misspelt parameter was accepted");
  } catch (const sp::InvalidArgumentError& e) {
    CHECK(std::string(e.what()).find("'timout'") != std::string::npos);
  }
}
