// Redis lock waits are polls, yet waiters are served in arrival order: a request that arrives while
// an earlier one waits queues behind it instead of taking the lock in the gap between a release
// and the waiter's next poll. Without that, a deadlock victim that retries at once takes back the
// key the winner waits for, and the two meet in the same cycle again (a livelock).
#include <exception>
#include <string>
#include <vector>

#include <asio/co_spawn.hpp>
#include <catch2/catch.hpp>

#include <statepact/redis.hpp>
#include <statepact/statepact.hpp>

#include "../support/run.hpp"
#include "../support/sleep.hpp"

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
