// What a reply reports must hold: with replicas_to_ack every success is confirmed by replicas
// (a replay and a "nothing to do" answer too), a failure after a script was sent leaves the
// outcome unknown, and a replay returns exactly the versions the commit produced.
#include <exception>
#include <string>

#include <asio/co_spawn.hpp>
#include <catch2/catch.hpp>

#include <statepact/detail/fingerprint.hpp>
#include <statepact/redis.hpp>
#include <statepact/statepact.hpp>

#include "../support/run.hpp"
#include "../support/sleep.hpp"
#include "redis_admin.hpp"

namespace sp = statepact;
using namespace std::chrono_literals;

namespace {

sp::CommitRequest keyed_write(const std::string& resource, int value) {
  sp::CommitRequest req;
  req.agent_id = "agent";
  req.resources = {resource};
  req.idempotency_key = "k-" + sp::test::random_hex();
  req.writes.push_back(sp::WriteOp{resource, "n", sp::Value(value)});
  req.fingerprint = sp::detail::fingerprint(req.resources, req.writes);
  return req;
}

// The message of the BackendUnavailableError `f` throws ("" if it throws none).
template <class F>
asio::awaitable<std::string> unavailable_message(F f) {
  std::string what;
  try {
    co_await f();
  } catch (const sp::BackendUnavailableError& e) {
    what = e.what();
  }
  co_return what;
}

}  // namespace

// The test server has no replica, so WAIT never counts one: nothing may be reported done.
TEST_CASE(
    "with replicas_to_ack, a replay, a revoke of nothing and an existing registration are "
    "confirmed too",
    "[redis][integration]") {
  const std::string prefix = "acks-" + sp::test::random_hex();
  sp::test::run([&prefix](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::RedisBackend plain(ex, sp::test::redis_test_url(), sp::RedisOptions().key_prefix(prefix));
    sp::RedisBackend acked(
        ex, sp::test::redis_test_url(),
        sp::RedisOptions().key_prefix(prefix).replicas_to_ack(1).replica_ack_timeout(50ms));
    const std::string r = "r";
    co_await plain.register_resource(r, sp::Value::parse(R"({"n": 0})"));

    const std::string registration = co_await unavailable_message(
        [&]() -> asio::awaitable<void> { co_await acked.register_resource(r); });
    CHECK_THAT(registration, Catch::Contains("confirmed the registration"));

    const sp::CommitRequest req = keyed_write(r, 1);
    int unknown = 0;
    for (int attempt = 0; attempt < 2; ++attempt) {
      try {
        co_await acked.commit(req);
      } catch (const sp::CommitUnknownError& e) {
        if (e.retryable()) ++unknown;
      }
    }
    CHECK(unknown == 2);  // the resend is a replay, as unconfirmed as the first apply
    // Applied once on the server, only not confirmed.
    const sp::CommitResult replayed = co_await plain.commit(req);
    CHECK(replayed.replayed);
    CHECK(replayed.versions.at(r) == 1);

    // Nothing to revoke: a lease never taken, and one released.
    const std::string never = co_await unavailable_message(
        [&]() -> asio::awaitable<void> { co_await acked.revoke_lease(r); });
    CHECK_THAT(never, Catch::Contains("confirmed the revocation"));
    const sp::Lease held = co_await plain.acquire_lease(r, "a", 10s);
    co_await plain.release_lease(held);
    const std::string released = co_await unavailable_message(
        [&]() -> asio::awaitable<void> { co_await acked.revoke_lease(r); });
    CHECK_THAT(released, Catch::Contains("confirmed the revocation"));
    const sp::Token fence = co_await plain.current_fence(r);
    CHECK(fence == held.token);
  });
}

// A client blocked in WAIT can be unblocked with an error (CLIENT UNBLOCK ... ERROR, or the master
// turned into a replica); the script ran before, so the outcome is unknown, never a refusal.
TEST_CASE("an error reply to WAIT after a script leaves the outcome unknown",
          "[redis][integration]") {
  const std::string prefix = "unblock-" + sp::test::random_hex();
  const std::string name = "unblock-" + sp::test::random_hex();
  sp::test::run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::RedisBackend plain(ex, sp::test::redis_test_url(), sp::RedisOptions().key_prefix(prefix));
    sp::RedisBackend acked(ex, sp::test::redis_test_url(),
                           sp::RedisOptions()
                               .key_prefix(prefix)
                               .client_name(name)
                               .replicas_to_ack(1)
                               .replica_ack_timeout(20s)
                               .command_timeout(30s));
    const std::string r = "r";
    co_await plain.register_resource(r, sp::Value::parse(R"({"n": 0})"));
    sp::test::RedisAdmin admin;
    // Unblocks the backend's connection once it waits in WAIT; false if it never did.
    auto unblock = [&]() -> asio::awaitable<bool> {
      for (int i = 0; i < 500; ++i) {
        if (admin.client_field(name, "cmd") == "wait") {
          const auto ids = admin.clients_named(name);
          if (ids.size() == 1) {
            co_return admin.command({"CLIENT", "UNBLOCK", ids.front(), "ERROR"}) == "1";
          }
        }
        co_await sp::test::sleep_for(10ms);
      }
      co_return false;
    };

    bool unblocked = false, unknown = false, retryable = false;
    std::string what;
    const sp::CommitRequest req = keyed_write(r, 1);
    auto commit = [&]() -> asio::awaitable<void> {
      try {
        co_await acked.commit(req);
      } catch (const sp::CommitUnknownError& e) {
        unknown = true;
        retryable = e.retryable();
      } catch (const sp::Error& e) {
        what = e.what();
      }
    };
    bool committed = false;
    asio::co_spawn(ex, commit(), [&](std::exception_ptr) { committed = true; });
    unblocked = co_await unblock();
    while (!committed) co_await sp::test::sleep_for(10ms);
    CHECK(unblocked);
    CHECK(unknown);
    CHECK(retryable);
    CHECK(what.empty());
    const sp::Entry written = co_await plain.read(r, "n");
    CHECK(written.value == sp::Value(1));

    // A lease: what a lost reply to an acquire means (it may or may not have happened).
    bool lease_unknown = false;
    auto acquire = [&]() -> asio::awaitable<void> {
      try {
        co_await acked.acquire_lease(r, "a", 30s);
      } catch (const sp::BackendUnavailableError& e) {
        lease_unknown =
            e.retryable() && std::string(e.what()).find("may or may not") != std::string::npos;
      } catch (const sp::Error& e) {
        what = e.what();
      }
    };
    bool done = false;
    asio::co_spawn(ex, acquire(), [&](std::exception_ptr) { done = true; });
    const bool unblocked_again = co_await unblock();
    while (!done) co_await sp::test::sleep_for(10ms);
    CHECK(unblocked_again);
    CHECK(lease_unknown);
    CHECK(what.empty());
  });
}

// cjson writes numbers with 14 significant digits: a stored result must keep versions exact.
TEST_CASE("a replay returns exactly the versions the commit produced, however large",
          "[redis][integration]") {
  const std::string prefix = "big-" + sp::test::random_hex();
  sp::test::run([&prefix](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::RedisBackend b(ex, sp::test::redis_test_url(), sp::RedisOptions().key_prefix(prefix));
    sp::test::RedisAdmin admin;
    const std::string r = "r";
    co_await b.register_resource(r, sp::Value::parse(R"({"n": 0})"));
    const auto keys = admin.keys_matching(prefix + ":version:*");
    REQUIRE(keys.size() == 1);
    admin.command({"SET", keys.front(), "123456789012345"});
    const sp::CommitRequest req = keyed_write(r, 1);
    const sp::CommitResult first = co_await b.commit(req);
    CHECK(first.versions.at(r) == 123456789012346u);
    const sp::CommitResult again = co_await b.commit(req);
    CHECK(again.replayed);
    CHECK(again.versions.at(r) == 123456789012346u);
  });
}
