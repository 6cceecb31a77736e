// Redis lock waits are polls, yet waiters are served in arrival order: a request that arrives while
// an earlier one waits queues behind it instead of taking the lock in the gap between a release
// and the waiter's next poll. Without that, a deadlock victim that retries at once takes back the
// key the winner waits for, and the two meet in the same cycle again (a livelock).
#include <chrono>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include <asio/co_spawn.hpp>
#include <catch2/catch.hpp>

#include <statepact/redis.hpp>
#include <statepact/statepact.hpp>

#include "../support/run.hpp"
#include "../support/sleep.hpp"
#include "lock_poll.hpp"  // src/redis
#include "redis_admin.hpp"
#include "scripts.hpp"  // generated from src/redis/lua

namespace sp = statepact;
using namespace std::chrono_literals;

namespace {

// Locks `key` exclusively for session `s`, notes `s` in `order` once granted, then ends the
// session (its lock goes at once). `done` tells the test it finished, with or without an error.
asio::awaitable<void> take_and_release(sp::RedisBackend& b, sp::SessionId s, std::string r,
                                       std::vector<sp::SessionId>& order,
                                       std::chrono::milliseconds timeout) {
  co_await b.lock(s, r, "x", sp::LockMode::exclusive, timeout);
  order.push_back(s);
  b.end_session(s);
}

}  // namespace

TEST_CASE("a lock waiter is served before a request that arrives after it",
          "[redis][integration]") {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::RedisBackend b(ex, sp::test::redis_test_url());
    const std::string r = "queue-" + sp::test::random_hex();
    co_await b.register_resource(r);
    const std::vector<std::string> names = {r};
    const auto s1 = co_await b.begin_session(names, sp::Isolation::pessimistic);
    const auto s2 = co_await b.begin_session(names, sp::Isolation::pessimistic);
    const auto s3 = co_await b.begin_session(names, sp::Isolation::pessimistic);
    co_await b.lock(s1, r, "x", sp::LockMode::exclusive, 1s);

    std::vector<sp::SessionId> order;
    bool s2_done = false;
    std::exception_ptr s2_error;
    asio::co_spawn(ex, take_and_release(b, s2, r, order, 5s), [&](std::exception_ptr e) {
      s2_error = e;
      s2_done = true;
    });
    // Long enough for s2's polls to back off to their longest sleep, so s3's request reaches the
    // server well before s2's next poll does.
    co_await sp::test::sleep_for(300ms);
    b.end_session(s1);
    co_await take_and_release(b, s3, r, order, 5s);
    co_await sp::test::eventually([&] { return s2_done; }, 5s, "the first waiter");
    CHECK_FALSE(s2_error);
    CHECK(order == std::vector<sp::SessionId>{s2, s3});
  });
}

TEST_CASE("a lock waiter that gives up leaves the queue at once", "[redis][integration]") {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::RedisBackend b(ex, sp::test::redis_test_url());
    const std::string r = "queue-" + sp::test::random_hex();
    co_await b.register_resource(r);
    const std::vector<std::string> names = {r};
    const auto s1 = co_await b.begin_session(names, sp::Isolation::pessimistic);
    const auto s2 = co_await b.begin_session(names, sp::Isolation::pessimistic);
    const auto s3 = co_await b.begin_session(names, sp::Isolation::pessimistic);
    co_await b.lock(s1, r, "x", sp::LockMode::exclusive, 1s);
    bool timed_out = false;
    try {
      co_await b.lock(s2, r, "x", sp::LockMode::exclusive, 100ms);
    } catch (const sp::LockTimeoutError&) {
      timed_out = true;
    }
    CHECK(timed_out);
    b.end_session(s1);
    // s2 no longer waits, so nothing is ahead of s3: well within the time a forgotten place in
    // the queue would take to expire.
    std::vector<sp::SessionId> order;
    co_await take_and_release(b, s3, r, order, 500ms);
    CHECK(order == std::vector<sp::SessionId>{s3});
  });
}

// A crashed waiter never removes its record from the wait-for graph, and a walk reaches it only if
// someone waits for its owner. Its record must still go within three record ttls of its last
// poll: when nobody waits any more, and while others keep waiting.
TEST_CASE("a crashed lock waiter's record leaves the wait-for graph within its bound",
          "[redis][integration]") {
  using clock = std::chrono::steady_clock;
  sp::test::RedisAdmin admin;
  const std::string waits = "waits-" + sp::test::random_hex() + ":waits";
  const auto ttl = sp::detail::LockPoll::wait_record_ttl;
  const auto bound = 3 * ttl + 500ms;  // and a margin for this test's polls
  // One poll's record, as the lock wait writes it.
  auto wait = [&](const std::string& owner, const std::string& holder) {
    return admin.command({"EVAL", sp::detail::scripts::wait, "1", waits, owner,
                          std::to_string(ttl.count()), holder});
  };
  auto recorded = [&](const std::string& owner) {
    return admin.command({"HEXISTS", waits, owner}) == "1";
  };

  REQUIRE(wait("dead:1", "holder:1") == "wait");
  auto since = clock::now();
  while (recorded("dead:1") && clock::now() - since < bound) std::this_thread::sleep_for(50ms);
  CHECK_FALSE(recorded("dead:1"));  // nobody waits any more

  REQUIRE(wait("dead:2", "holder:2") == "wait");
  since = clock::now();
  while (recorded("dead:2") && clock::now() - since < bound) {
    REQUIRE(wait("live:1", "holder:3") == "wait");  // never reaches dead:2 in its walk
    std::this_thread::sleep_for(50ms);
  }
  CHECK_FALSE(recorded("dead:2"));  // others kept waiting
  CHECK(recorded("live:1"));
  admin.command({"DEL", waits});
}
