// Two backends (two connections, as two processes would have) race for one lease from several
// threads: one live owner at a time, tokens strictly increasing, none reused.
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include <asio/co_spawn.hpp>
#include <catch2/catch.hpp>

#include <statepact/redis.hpp>
#include <statepact/statepact.hpp>

#include "../support/run.hpp"
#include "../support/sleep.hpp"
#include "../support/workers.hpp"
#include "redis_admin.hpp"

namespace sp = statepact;

namespace {

struct Race {
  std::string resource;
  std::atomic<int> holders{0};
  std::atomic<int> overlaps{0};
  std::mutex mu;
  std::vector<sp::Token> tokens;  // in the order the leases were won
};

asio::awaitable<void> contender(sp::RedisBackend& b, Race& race, std::string owner, int wins) {
  for (int won = 0; won < wins;) {
    try {
      auto lease = co_await b.acquire_lease(race.resource, owner, std::chrono::seconds(30));
      if (race.holders.fetch_add(1) != 0) ++race.overlaps;
      {
        std::lock_guard g(race.mu);
        race.tokens.push_back(lease.token);
      }
      co_await sp::test::sleep_for(std::chrono::milliseconds(1));
      race.holders.fetch_sub(1);
      co_await b.release_lease(lease);
      ++won;
    } catch (const sp::LeaseNotAvailableError&) {
    }
    co_await sp::test::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace

TEST_CASE("two backends racing for one lease: one owner at a time, tokens strictly increase",
          "[redis][integration]") {
  Race race;
  race.resource = "race-" + sp::test::random_hex();
  constexpr int per_backend = 4, wins = 10;
  sp::test::run(
      [&race](asio::any_io_executor ex) -> asio::awaitable<void> {
        sp::RedisBackend first(ex, sp::test::redis_test_url());
        sp::RedisBackend second(ex, sp::test::redis_test_url());
        sp::test::Workers pool(ex);
        for (int i = 0; i < per_backend; ++i) {
          for (auto* b : {&first, &second}) {
            const auto owner = fmt::format("{}-{}", b == &first ? "p1" : "p2", i);
            pool.spawn(contender(*b, race, owner, wins));
          }
        }
        co_await pool.join(std::chrono::seconds(60), "contenders");
      },
      2);
  CHECK(race.overlaps.load() == 0);
  REQUIRE(race.tokens.size() == static_cast<std::size_t>(2 * per_backend * wins));
  for (std::size_t i = 1; i < race.tokens.size(); ++i) CHECK(race.tokens[i] > race.tokens[i - 1]);
  CHECK(race.tokens.front() == 1);
  CHECK(race.tokens.back() == race.tokens.size());  // every token issued was used once
}
