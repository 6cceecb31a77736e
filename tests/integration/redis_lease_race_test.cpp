// Separate processes, each with its own backend and connections, race for one lease.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <statepact/redis.hpp>
#include <statepact/statepact.hpp>

#include "../support/run.hpp"
#include "lease_race.hpp"
#include "redis_admin.hpp"

namespace sp = statepact;

namespace {

// A fresh connection per question: the harness asks between its waitpid polls.
sp::Token fence_of(const std::string& resource) {
  return sp::test::run([&](asio::any_io_executor ex) -> asio::awaitable<sp::Token> {
    sp::RedisBackend backend(ex, sp::test::redis_test_url());
    co_return co_await backend.current_fence(resource);
  });
}

void take_over(const std::string& resource) {
  sp::test::run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::RedisBackend backend(ex, sp::test::redis_test_url());
    std::optional<sp::Lease> lease;
    try {
      lease = co_await backend.acquire_lease(resource, "takeover", std::chrono::seconds(30));
    } catch (const sp::LeaseNotAvailableError&) {
    }
    if (lease) co_await backend.release_lease(*lease);
  });
}

// The tokens in the order their commits landed, as storage recorded them.
std::vector<sp::Token> storage_log(const std::string& resource) {
  return sp::test::run([&](asio::any_io_executor ex) -> asio::awaitable<std::vector<sp::Token>> {
    sp::RedisBackend backend(ex, sp::test::redis_test_url());
    auto e = co_await backend.read(resource, "log");
    std::vector<sp::Token> log;
    if (e.value)
      for (const auto& t : *e.value) log.push_back(t.get<sp::Token>());
    co_return log;
  });
}

}  // namespace

TEST_CASE(
    "four processes and a frozen stale writer racing for one lease: one live owner at a time, "
    "tokens strictly increase, and storage refuses the stale commit",
    "[redis][integration][race]") {
  const std::string resource = "process-race-" + sp::test::random_hex();
  constexpr int processes = 4, wins = 15;
  sp::test::StaleWriterHooks hooks{[&] { return fence_of(resource); },
                                   [&] { take_over(resource); }};
  const auto race =
      sp::test::run_lease_race(STATEPACT_LEASE_CONTENDER, "redis", sp::test::redis_test_url(),
                               resource, processes, wins, hooks);
  for (int p = 0; p < processes; ++p) {
    INFO("process " << p);
    CHECK(race.exit_codes[p] == 0);
  }
  const auto verdict = sp::test::judge_race(race.wins);
  CHECK(verdict.wins == static_cast<std::size_t>(processes * wins));
  CHECK(verdict.repeated_tokens == 0);
  CHECK(verdict.out_of_order == 0);
  CHECK(verdict.overlaps == 0);
  // How much the processes interleaved depends on scheduling: reported, not required.
  WARN("handoffs between processes: " << verdict.handoffs << " of " << verdict.wins - 1);

  // The stale writer froze holding a token, was continued once a newer one existed, and storage
  // refused its commit.
  CHECK(race.stale_token > 0);
  CHECK(race.stale_continued_after_takeover);
  CHECK(race.stale_exit_code == 0);
  CHECK(race.stale_verdict == "refused");

  // Storage's own record: every win's commit once, in strictly increasing token order, and not
  // the stale token.
  const auto log = storage_log(resource);
  std::vector<sp::Token> won;
  for (const auto& w : race.wins) won.push_back(w.token);
  std::sort(won.begin(), won.end());
  CHECK(std::is_sorted(log.begin(), log.end()));
  CHECK(std::adjacent_find(log.begin(), log.end()) == log.end());
  CHECK(log == won);
  CHECK(std::find(log.begin(), log.end(), race.stale_token) == log.end());
  // No token was issued twice and the fence is the highest issued.
  CHECK(std::find(won.begin(), won.end(), race.stale_token) == won.end());
  const sp::Token fence = fence_of(resource);
  CHECK(fence >= std::max<sp::Token>(verdict.max_token, race.stale_token));
  CHECK(fence <= static_cast<sp::Token>(processes * wins) + 2);  // the stale win, a takeover
}
