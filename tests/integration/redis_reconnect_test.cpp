// A connection killed by the server (CLIENT KILL) is replaced; calls caught in the loss fail with
// the documented errors, and replies after the reconnect always belong to their own request.
#include <atomic>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include <asio/co_spawn.hpp>
#include <catch2/catch.hpp>

#include <statepact/redis.hpp>
#include <statepact/statepact.hpp>

#include "../support/run.hpp"
#include "../support/sleep.hpp"
#include "redis_admin.hpp"

namespace sp = statepact;

namespace {

// Reads key k<i> of `r` (which holds i) `rounds` times; counts wrong answers and losses.
asio::awaitable<void> reader(sp::RedisBackend& b, std::string r, int i, int rounds,
                             std::atomic<int>& wrong, std::atomic<int>& lost) {
  for (int n = 0; n < rounds; ++n) {
    try {
      auto e = co_await b.read(r, "k" + std::to_string(i));
      if (!e.value || *e.value != sp::Value(i)) ++wrong;
    } catch (const sp::BackendUnavailableError&) {
      ++lost;
    }
  }
}

asio::awaitable<void> committer(sp::Manager<sp::RedisBackend>& m, std::string r, int rounds,
                                std::atomic<int>& unexpected) {
  for (int n = 0; n < rounds; ++n) {
    try {
      auto s = co_await m.session(sp::SessionOptions("writer").resource(r));
      co_await s.write("counter", n);
      co_await s.commit();
    } catch (const sp::CommitUnknownError& e) {
      if (e.has_idempotency_key()) ++unexpected;  // it had none
    } catch (const sp::BackendUnavailableError&) {
    } catch (...) {
      ++unexpected;
    }
  }
}

}  // namespace

TEST_CASE("a killed connection is replaced and replies never go to the wrong request",
          "[redis][integration]") {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    const std::string client = "statepact-it-" + sp::test::random_hex();
    sp::RedisBackend b(ex, sp::test::redis_test_url(), sp::RedisOptions().client_name(client));
    sp::Manager<sp::RedisBackend> m(b);
    sp::test::RedisAdmin admin;
    const std::string r = "reconnect-" + sp::test::random_hex();
    constexpr int keys = 16;
    sp::Value init = sp::Value::object();
    for (int i = 0; i < keys; ++i) init["k" + std::to_string(i)] = i;
    co_await m.register_resource(r, init);
    auto lease = co_await b.acquire_lease(r, "worker-a", std::chrono::seconds(30));
    CHECK(admin.clients_named(client).size() == 1);

    // Killed while idle: the loss is noticed, and the next call reconnects.
    CHECK(admin.kill_clients_named(client) == 1);
    co_await sp::test::sleep_for(std::chrono::milliseconds(100));
    auto fence = co_await b.current_fence(r);
    CHECK(fence == lease.token);
    auto renewed = co_await b.renew_lease(lease, std::nullopt);
    CHECK(renewed.token == lease.token);

    // Killed while idle and read at once, before the loss can have been noticed: the read is sent
    // again on a fresh connection instead of failing.
    for (int i = 0; i < 5; ++i) {
      CHECK(admin.kill_clients_named(client) == 1);
      auto entry = co_await b.read(r, "k3");
      CHECK(entry.value == std::optional<sp::Value>(sp::Value(3)));
      std::vector<std::string> resources(1, r);
      auto snap = co_await b.snapshot(std::move(resources));
      CHECK(snap.size() == 1);
    }

    // Killed with many commands in flight.
    std::atomic<int> wrong{0}, lost{0}, unexpected{0}, done{0};
    constexpr int readers = 32, rounds = 40;
    for (int i = 0; i < readers; ++i)
      asio::co_spawn(ex, reader(b, r, i % keys, rounds, wrong, lost), [&](std::exception_ptr e) {
        if (e) ++unexpected;
        ++done;
      });
    asio::co_spawn(ex, committer(m, r, rounds, unexpected), [&](std::exception_ptr e) {
      if (e) ++unexpected;
      ++done;
    });
    co_await sp::test::sleep_for(std::chrono::milliseconds(5));
    admin.kill_clients_named(client);
    co_await sp::test::sleep_for(std::chrono::milliseconds(20));
    admin.kill_clients_named(client);
    auto finished = co_await sp::test::eventually([&] { return done.load() == readers + 1; },
                                                  std::chrono::seconds(30));
    CHECK(finished);
    CHECK(wrong.load() == 0);
    CHECK(unexpected.load() == 0);
    INFO("calls lost to the kills: " << lost.load());

    // Afterwards everything answers, each with its own key's value, on one fresh connection.
    std::atomic<int> wrong_after{0}, lost_after{0};
    done = 0;
    for (int i = 0; i < readers; ++i)
      asio::co_spawn(ex, reader(b, r, i % keys, 5, wrong_after, lost_after),
                     [&](std::exception_ptr) { ++done; });
    co_await sp::test::eventually([&] { return done.load() == readers; });
    CHECK(wrong_after.load() == 0);
    CHECK(lost_after.load() == 0);
    CHECK(admin.clients_named(client).size() == 1);
    auto final_fence = co_await b.current_fence(r);
    CHECK(final_fence == lease.token);
  });
}

TEST_CASE("an unreachable server is BackendUnavailableError, quickly", "[redis][integration]") {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    // Port 1 on loopback: nothing listens there, the connect is refused.
    sp::RedisBackend b(ex, "redis://127.0.0.1:1/0",
                       sp::RedisOptions().connect_timeout(std::chrono::milliseconds(500)));
    bool unavailable = false;
    try {
      co_await b.current_fence("anything");
    } catch (const sp::BackendUnavailableError&) {
      unavailable = true;
    }
    CHECK(unavailable);
    sp::CommitRequest req;
    req.agent_id = "a";
    req.resources.push_back("anything");
    bool commit_unavailable = false;
    try {
      co_await b.commit(std::move(req));
    } catch (const sp::BackendUnavailableError&) {
      commit_unavailable = true;  // never sent: not CommitUnknownError
    }
    CHECK(commit_unavailable);
  });
}
