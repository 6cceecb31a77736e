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

#include "../support/expect.hpp"
#include "../support/offline.hpp"
#include "../support/ports.hpp"
#include "../support/run.hpp"
#include "../support/sleep.hpp"
#include "../support/workers.hpp"
#include "redis_admin.hpp"

namespace sp = statepact;

namespace {

// What happened to the calls of the in-flight test.
struct Tally {
  std::atomic<int> in_flight{0};  // calls sent and not yet ended
  std::atomic<int> answered{0}, wrong{0}, lost{0};
  std::atomic<int> committed{0}, unknown{0}, unexpected{0};
};

// Reads key k<i> of `r` (which holds i) `rounds` times.
asio::awaitable<void> reader(sp::RedisBackend& b, std::string r, int i, int rounds, Tally& t) {
  for (int n = 0; n < rounds; ++n) {
    ++t.in_flight;
    try {
      auto e = co_await b.read(r, "k" + std::to_string(i));
      if (!e.value || *e.value != sp::Value(i))
        ++t.wrong;
      else
        ++t.answered;
    } catch (const sp::BackendUnavailableError&) {
      ++t.lost;  // a read caught by one kill is resent, so this must not happen
    }
    --t.in_flight;
  }
}

asio::awaitable<void> committer(sp::Manager<sp::RedisBackend>& m, std::string r, int rounds,
                                Tally& t) {
  for (int n = 0; n < rounds; ++n) {
    ++t.in_flight;
    try {
      auto s = co_await m.session(sp::SessionOptions("writer").resource(r));
      co_await s.write("counter", n);
      co_await s.commit();
      ++t.committed;
    } catch (const sp::CommitUnknownError& e) {
      if (e.has_idempotency_key())
        ++t.unexpected;  // it had none
      else
        ++t.unknown;
    } catch (...) {
      ++t.unexpected;
    }
    --t.in_flight;
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

    // Killed with many commands in flight: each read is answered (resent if it was caught) and
    // each commit either lands or ends as CommitUnknownError.
    constexpr int readers = 32, rounds = 40;
    Tally tally;
    int in_flight_at_kill = 0, killed = 0;
    {
      sp::test::Workers pool(ex);
      for (int i = 0; i < readers; ++i) pool.spawn(reader(b, r, i % keys, rounds, tally));
      pool.spawn(committer(m, r, rounds, tally));
      co_await sp::test::eventually([&] { return tally.in_flight.load() >= readers / 2; }, 10s,
                                    "commands in flight");
      in_flight_at_kill = tally.in_flight.load();
      killed = admin.kill_clients_named(client);
      co_await pool.join(30s, "readers and the committer");
    }
    CHECK(killed == 1);
    CHECK(in_flight_at_kill > 0);
    INFO("in flight at the kill: " << in_flight_at_kill << "; commits landed "
                                   << tally.committed.load() << ", unknown "
                                   << tally.unknown.load());
    CHECK(tally.answered.load() == readers * rounds);
    CHECK(tally.wrong.load() == 0);
    CHECK(tally.lost.load() == 0);
    CHECK(tally.unexpected.load() == 0);
    CHECK(tally.committed.load() + tally.unknown.load() == rounds);

    // Afterwards everything answers, each with its own key's value, on one fresh connection.
    Tally after;
    {
      sp::test::Workers pool(ex);
      for (int i = 0; i < readers; ++i) pool.spawn(reader(b, r, i % keys, 5, after));
      co_await pool.join(30s, "readers");
    }
    CHECK(after.answered.load() == readers * 5);
    CHECK(admin.clients_named(client).size() == 1);
    auto final_fence = co_await b.current_fence(r);
    CHECK(final_fence == lease.token);
  });
}

TEST_CASE("a connection killed while its commit waits in the server is CommitUnknownError",
          "[redis][integration]") {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    const std::string client = "statepact-it-" + sp::test::random_hex();
    sp::RedisBackend b(ex, sp::test::redis_test_url(), sp::RedisOptions().client_name(client));
    sp::Manager<sp::RedisBackend> m(b);
    sp::test::RedisAdmin admin;
    const std::string r = "midcommit-" + sp::test::random_hex();
    co_await m.register_resource(r, sp::Value::object());
    for (bool keyed : {false, true}) {
      INFO("with an idempotency key: " << keyed);
      auto options = sp::SessionOptions("writer").resource(r);
      if (keyed) options.idempotency_key("order-" + sp::test::random_hex());
      auto s = co_await m.session(options);
      co_await s.write("k", keyed ? 2 : 1);
      // The server holds the commit back (CLIENT PAUSE WRITE) until its connection is killed.
      admin.pause_writes(10000);
      struct Unpause {
        sp::test::RedisAdmin& a;
        ~Unpause() { a.unpause(); }
      } unpause{admin};
      std::optional<sp::CommitUnknownError> unknown;
      std::exception_ptr other;
      bool finished = false;
      {
        sp::test::Workers pool(ex);
        auto commit = [&]() -> asio::awaitable<void> {
          try {
            co_await s.commit();
          } catch (const sp::CommitUnknownError& e) {
            unknown = e;
          }
          finished = true;
        };
        pool.spawn(commit());
        co_await sp::test::eventually(
            [&] { return admin.client_flags(client).find('b') != std::string::npos; }, 10s,
            "the commit to wait in the server");
        CHECK(!finished);
        CHECK(admin.kill_clients_named(client) == 1);
        co_await pool.join(10s, "the commit");
      }
      REQUIRE(unknown);
      CHECK(unknown->has_idempotency_key() == keyed);
    }
    // Killed before the server ran it: nothing landed, and the backend works again.
    auto e = co_await b.read(r, "k");
    CHECK(!e.value);
    auto after = co_await m.session(sp::SessionOptions("writer").resource(r));
    co_await after.write("k", 3);
    co_await after.commit();
    auto e3 = co_await b.read(r, "k");
    CHECK(e3.value == sp::Value(3));
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

TEST_CASE("bad input is InvalidArgumentError even when the server is unreachable",
          "[redis][integration][validation]") {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    const int closed = sp::test::unused_loopback_port();  // nothing listens there
    sp::RedisBackend b(ex, fmt::format("redis://127.0.0.1:{}/0", closed),
                       sp::RedisOptions().connect_timeout(std::chrono::milliseconds(500)));
    // The server really is out of reach: a valid call fails as unavailable.
    auto unavailable = co_await sp::test::thrown<sp::BackendUnavailableError>(
        [&] { return b.current_fence("offline-job"); });
    CHECK(unavailable);
    // Bad input never gets that far.
    auto wrong = co_await sp::test::bad_input_offline(b);
    CHECK(wrong == 0);
  });
}
