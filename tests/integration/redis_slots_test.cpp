// A single-resource workload keeps every key it creates in one Redis Cluster hash slot: the
// resource is the hash tag of its lease, fence, version, state and idempotency records.
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <asio/co_spawn.hpp>
#include <catch2/catch.hpp>

#include <statepact/detail/fingerprint.hpp>
#include <statepact/redis.hpp>
#include <statepact/statepact.hpp>

#include "../support/run.hpp"
#include "../support/sleep.hpp"
#include "redis_admin.hpp"
#include "slot.hpp"  // src/redis

namespace sp = statepact;
using namespace std::chrono_literals;

using statepact::detail::key_slot;

TEST_CASE("a single-resource workload keeps all its keys in one cluster slot",
          "[redis][integration]") {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    const std::string prefix = "slots-" + sp::test::random_hex();
    sp::RedisBackend b(ex, sp::test::redis_test_url(), sp::RedisOptions().key_prefix(prefix));
    sp::Manager<sp::RedisBackend> m(b);
    const std::string r = "orders {eu}:1";  // braces and colons in the name change nothing
    co_await m.register_resource(r, sp::Value::parse(R"({"n": 0})"));
    auto lease = co_await m.lease(r, "worker", 30s);
    for (auto mode : {sp::Isolation::none, sp::Isolation::optimistic, sp::Isolation::snapshot,
                      sp::Isolation::serializable}) {
      auto s = co_await m.session(
          sp::SessionOptions("agent").resource(r).isolation(mode).fence(lease.token));
      auto v = co_await s.read("n");
      co_await s.write("n", v->get<int>() + 1);
      co_await s.commit();
    }
    for (int i = 0; i < 2; ++i) {  // an idempotent commit and its replay
      auto s = co_await m.session(
          sp::SessionOptions("agent").resource(r).idempotency_key("order-7 {x}"));
      co_await s.write("paid", true);
      auto result = co_await s.commit();
      CHECK(result.replayed == (i == 1));
    }
    co_await b.release_lease(lease);

    sp::test::RedisAdmin admin;
    const auto keys = admin.keys_matching(prefix + ":*");
    std::set<int> slots;
    std::set<std::string> kinds;
    for (const auto& k : keys) {
      slots.insert(key_slot(k));
      kinds.insert(k.substr(prefix.size() + 1, k.find(':', prefix.size() + 1) - prefix.size() - 1));
    }
    INFO("keys: " << keys.size());
    CHECK(slots.size() == 1);
    // What the workload left: the fence, the released lease (its token only), version, state and
    // policy, and the idempotency record.
    CHECK(kinds == std::set<std::string>{"fence", "idem", "lease", "policy", "state", "version"});
  });
}

TEST_CASE("an idempotent commit is found again whatever order its request lists the resources in",
          "[redis][integration]") {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::RedisBackend b(ex, sp::test::redis_test_url());
    const std::string base = "order-" + sp::test::random_hex() + "-";
    const std::string ra = base + "a", rb = base + "b";
    co_await b.register_resource(ra, sp::Value::object());
    co_await b.register_resource(rb, sp::Value::object());
    auto request = [&](std::vector<std::string> resources) {
      sp::CommitRequest req;
      req.agent_id = "agent";
      req.resources = std::move(resources);
      req.writes.push_back(sp::WriteOp{ra, "x", sp::Value(1)});
      req.idempotency_key = base + "key";
      req.fingerprint = sp::detail::fingerprint(req.resources, req.writes);
      return req;
    };
    std::vector<std::string> b_first, a_first;
    b_first.push_back(rb);
    b_first.push_back(ra);
    a_first.push_back(ra);
    a_first.push_back(rb);
    auto first = co_await b.commit(request(b_first));
    CHECK(!first.replayed);
    auto again = co_await b.commit(request(a_first));  // a retry that lists them the other way
    CHECK(again.replayed);
    CHECK(again.versions == first.versions);
  });
}

// A one-node Redis Cluster refuses a command whose keys span slots (CROSSSLOT): every script of a
// single-resource pessimistic workload (lock waits and a deadlock walk included) names only keys
// of one slot. The wait-for graph is one key of its own, touched by its own script.
TEST_CASE("pessimistic locks, waits and deadlock detection run on a one-node cluster",
          "[redis][integration]") {
  // The cluster bus port is the server's + 10000 unless set: a reserved one of its own.
  sp::test::PrivateRedis server(
      fmt::format("--cluster-enabled yes --cluster-config-file nodes.conf --cluster-port {}",
                  sp::test::reserve_loopback_port()));
  sp::test::RedisAdmin admin(server.port());
  admin.command({"CLUSTER", "ADDSLOTSRANGE", "0", "16383"});
  for (int i = 0;
       i < 500 && admin.command({"CLUSTER", "INFO"}).find("cluster_state:ok") == std::string::npos;
       ++i)
    std::this_thread::sleep_for(10ms);
  REQUIRE(admin.command({"CLUSTER", "INFO"}).find("cluster_state:ok") != std::string::npos);

  sp::test::run([&server](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::RedisBackend b(ex, server.url());
    const std::string r = "ledger";
    co_await b.register_resource(r);
    const std::vector<std::string> names = {r};
    const auto s1 = co_await b.begin_session(names, sp::Isolation::pessimistic);
    const auto s2 = co_await b.begin_session(names, sp::Isolation::pessimistic);
    co_await b.lock(s1, r, "x", sp::LockMode::exclusive, 1s);
    co_await b.lock(s2, r, "y", sp::LockMode::exclusive, 1s);
    // s1 waits for y (held by s2) ...
    bool s1_done = false;
    std::exception_ptr s1_error;
    asio::co_spawn(
        ex,
        [&b, s1, r]() -> asio::awaitable<void> {
          co_await b.lock(s1, r, "y", sp::LockMode::exclusive, 5s);
        },
        [&](std::exception_ptr e) {
          s1_error = e;
          s1_done = true;
        });
    co_await sp::test::sleep_for(100ms);
    // ... so s2 asking for x (held by s1) closes the cycle.
    bool deadlock = false;
    try {
      co_await b.lock(s2, r, "x", sp::LockMode::exclusive, 5s);
    } catch (const sp::DeadlockError&) {
      deadlock = true;
    }
    CHECK(deadlock);
    b.end_session(s2);  // frees y: s1 gets it
    co_await sp::test::eventually([&] { return s1_done; }, 3s, "s1's lock to be granted");
    CHECK_FALSE(s1_error);
    sp::CommitRequest req;
    req.session = s1;
    req.agent_id = "agent";
    req.resources = names;
    req.writes.push_back(sp::WriteOp{r, "x", sp::Value(1)});
    auto result = co_await b.commit(std::move(req));
    CHECK(result.versions.at(r) == 1);
  });
}
