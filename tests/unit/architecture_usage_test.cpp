// The usage block of ARCHITECTURE.md, exactly as written there, must compile and run.
#include <catch2/catch.hpp>

#include <statepact/statepact.hpp>

#include "../support/run.hpp"

using namespace std::chrono_literals;
using statepact::SessionOptions;

namespace {

struct Outcome {
  statepact::Token held_token = 0;
  statepact::Token fence_after = 0;
  std::optional<statepact::Value> status;
};

asio::awaitable<Outcome> architecture_usage() {
  Outcome out;
  // ---- begin: ARCHITECTURE.md usage ----
  statepact::MemoryBackend backend;
  statepact::Manager<statepact::MemoryBackend> manager(backend);
  auto lease = co_await manager.lease("job-42", "worker-a", 30s);
  auto session =
      co_await manager.session(SessionOptions("worker-a").resource("job-42").fence(lease.token));
  co_await session.write("status", "running");
  co_await session.commit();
  lease = co_await manager.backend().renew_lease(lease);
  co_await manager.backend().release_lease(lease);

  statepact::LeaseManager<statepact::MemoryBackend> leases(manager.backend(), 30s);
  auto work = [&](const statepact::Lease& held) -> asio::awaitable<void> {
    /* ... fenced by held.token */
    out.held_token = held.token;
    co_return;
  };
  co_await leases.hold("job-42", "worker-a", work, statepact::HoldOptions().auto_renew(true));
  // ---- end ----
  out.fence_after = co_await backend.current_fence("job-42");
  out.status = (co_await backend.read("job-42", "status")).value;
  co_return out;
}

}  // namespace

TEST_CASE("the ARCHITECTURE.md usage block runs as written", "[unit][usage]") {
  auto out = statepact::test::run([](asio::any_io_executor) { return architecture_usage(); });
  CHECK(out.held_token == 2);  // released after the session, so hold got the next token
  CHECK(out.fence_after == 2);
  REQUIRE(out.status);
  CHECK(*out.status == statepact::Value("running"));
}
