// With AOF on, fencing tokens survive a server restart, clean (SHUTDOWN) or a crash (SIGKILL,
// with appendfsync always), and are never reused; each restart is confirmed by a new run_id; the
// backend reconnects by itself and reloads its scripts (NOSCRIPT -> EVAL). Runs its own private
// server, so restarting it disturbs no other test.
#include <chrono>
#include <cstdlib>
#include <string>

#include <unistd.h>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <statepact/redis.hpp>
#include <statepact/statepact.hpp>

#include "../support/run.hpp"
#include "../support/sleep.hpp"
#include "redis_admin.hpp"

namespace sp = statepact;

namespace {

// The first call after a restart may still meet the dead connection: retry while unavailable.
asio::awaitable<sp::Token> fence_after_restart(sp::RedisBackend& b, std::string r) {
  for (int attempt = 0;; ++attempt) {
    try {
      co_return co_await b.current_fence(r);
    } catch (const sp::BackendUnavailableError&) {
      if (attempt == 20) throw;
    }
    co_await sp::test::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

TEST_CASE("with AOF, tokens survive a restart and are never reused", "[redis][integration]") {
  sp::test::PrivateRedis server;
  for (bool crash : {false, true}) {
    INFO((crash ? "restarted after SIGKILL" : "restarted after SHUTDOWN"));
    sp::test::run([&server, crash](asio::any_io_executor ex) -> asio::awaitable<void> {
      sp::RedisBackend b(ex, server.url());
      const std::string r = crash ? "persisted-job-crash" : "persisted-job";
      auto a = co_await b.acquire_lease(r, "worker-a", std::chrono::seconds(30));
      CHECK(a.token == 1);
      co_await b.release_lease(a);
      auto a2 = co_await b.acquire_lease(r, "worker-a", std::chrono::seconds(30));
      CHECK(a2.token == 2);

      const auto before = server.run_id();
      if (crash)
        server.kill();
      else
        server.stop();
      CHECK(!server.running());
      server.start();
      const auto after = server.run_id();
      INFO("run_id " << before << " then " << after);
      REQUIRE(after != before);

      auto fence = co_await fence_after_restart(b, r);
      CHECK(fence == 2);
      // The live lease survived too: another owner is refused, the holder can renew. The scripts
      // are gone from the restarted server, so these also exercise the NOSCRIPT fallback.
      auto refused = false;
      try {
        co_await b.acquire_lease(r, "worker-b", std::chrono::seconds(30));
      } catch (const sp::LeaseNotAvailableError& e) {
        refused = e.holder_token() == 2;
      }
      CHECK(refused);
      auto renewed = co_await b.renew_lease(a2, std::nullopt);
      CHECK(renewed.token == 2);
      auto released = co_await b.release_lease(renewed);
      CHECK(released);
      auto b3 = co_await b.acquire_lease(r, "worker-b", std::chrono::seconds(30));
      CHECK(b3.token == 3);
    });
  }
}
