// Separate processes, each with its own backend and connections, race for one lease.
#include <catch2/catch.hpp>

#include <statepact/redis.hpp>
#include <statepact/statepact.hpp>

#include "../support/run.hpp"
#include "lease_race.hpp"
#include "redis_admin.hpp"

namespace sp = statepact;

TEST_CASE("four processes racing for one lease: one live owner at a time, tokens strictly increase",
          "[redis][integration][race]") {
  const std::string resource = "process-race-" + sp::test::random_hex();
  constexpr int processes = 4, wins = 15;
  const auto race = sp::test::run_lease_race(STATEPACT_LEASE_CONTENDER, "redis",
                                             sp::test::redis_test_url(), resource, processes, wins);
  for (int p = 0; p < processes; ++p) {
    INFO("process " << p);
    CHECK(race.exit_codes[p] == 0);
  }
  const auto verdict = sp::test::judge_race(race.wins);
  CHECK(verdict.wins == static_cast<std::size_t>(processes * wins));
  CHECK(verdict.repeated_tokens == 0);
  CHECK(verdict.out_of_order == 0);
  CHECK(verdict.overlaps == 0);
  // The processes really interleaved (each win is followed by a pause of up to 2 ms).
  CHECK(verdict.handoffs >= processes * wins / 4);
  // Every win was a fresh token and nothing else took one: the high-water mark is the last win.
  CHECK(verdict.max_token == static_cast<std::uint64_t>(processes * wins));
  const sp::Token fence =
      sp::test::run([&](asio::any_io_executor ex) -> asio::awaitable<sp::Token> {
        sp::RedisBackend backend(ex, sp::test::redis_test_url());
        co_return co_await backend.current_fence(resource);
      });
  CHECK(fence == verdict.max_token);
}
