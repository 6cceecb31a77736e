// The Redis backend on the test cluster (scripts/servers/redis_cluster.sh: 3 masters, 3 replicas)
// while an operator changes it: a request over two slots, a slot migrated under running clients, a
// manual failover, and a master killed with SIGKILL. The tests change the cluster's shape, so they
// run alone (tests/redis.cmake gives them a lock with the cluster's conformance suite).
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <asio/experimental/awaitable_operators.hpp>
#include <catch2/catch.hpp>

#include <statepact/detail/fingerprint.hpp>
#include <statepact/redis.hpp>
#include <statepact/statepact.hpp>

#include "../support/run.hpp"
#include "../support/sleep.hpp"
#include "colocation.hpp"  // src/redis
#include "redis_cluster_admin.hpp"

namespace sp = statepact;
using namespace std::chrono_literals;
using sp::test::ClusterAdmin;
using namespace asio::experimental::awaitable_operators;

namespace {

// What one client saw while the cluster changed under it: each round acquires the lease as a new
// owner, commits n + 1 fenced by the token, and releases. A round that fails is done again by the
// same owner (re-acquiring as the same owner is safe: the same lease, the same token). Two
// clients, each with a backend (a connection) of its own, race for the one lease.
struct Seen {
  std::vector<std::pair<int, sp::Token>> tokens;  // (round, token) the backend said was held
  int committed = 0;                              // commits reported applied
  int unknown = 0;                                // CommitUnknownError: applied or not
  int retried = 0;                                // retryable errors (the cluster was changing)
  int busy = 0;                                   // the other client held the lease
  std::vector<std::string> errors;                // the first few retryable ones
  std::vector<std::string> fatal;                 // errors that are not retryable
};

// `after`: rounds both clients completed once the operator was done (they stop at 20).
asio::awaitable<void> client(sp::RedisBackend& b, std::string resource, std::string name,
                             std::atomic<int>& phase, int& after, Seen& seen) {
  sp::Manager<sp::RedisBackend> m(b);
  int round = 0;
  while (phase.load() < 2 || after < 20) {
    if (phase.load() == 3) break;  // the operator gave up: stop
    const std::string owner = fmt::format("{}-{}", name, round);
    auto pause = 0ms;  // before the next try, after a failure
    try {
      sp::Lease lease = co_await b.acquire_lease(resource, owner, 10s);
      seen.tokens.emplace_back(round, lease.token);
      try {
        auto s =
            co_await m.session(sp::SessionOptions(owner).resource(resource).fence(lease.token));
        auto n = co_await s.read("n");
        co_await s.write("n", (n ? n->get<int>() : 0) + 1);
        co_await s.commit();
        ++seen.committed;
      } catch (const sp::CommitUnknownError&) {
        ++seen.unknown;
      }
      co_await b.release_lease(lease);
      if (phase.load() >= 2) ++after;
      ++round;
    } catch (const sp::LeaseNotAvailableError&) {
      ++seen.busy;
      pause = 2ms;
    } catch (const sp::Error& e) {
      if (!e.retryable()) seen.fatal.push_back(e.what());
      if (seen.errors.size() < 5) seen.errors.push_back(e.what());
      ++seen.retried;
      pause = 20ms;
    }
    if (seen.fatal.size() > 5) co_return;
    if (pause > 0ms) co_await sp::test::sleep_for(pause);
  }
}

// Tokens the backend said were held: each round's larger than every earlier round's (a token
// issued twice, or one lost in a failover and issued again, breaks this); a round done again may
// see its own token again.
void check_tokens(const Seen& seen, const Seen& other) {
  // A token the two clients were both given: issued twice.
  std::set<sp::Token> mine;
  for (auto [round, token] : seen.tokens) mine.insert(token);
  for (auto [round, token] : other.tokens) {
    INFO("token " << token << " was given to both clients");
    CHECK(mine.count(token) == 0);
  }
  std::string all;
  for (auto [round, token] : seen.tokens) all += fmt::format("{}:{} ", round, token);
  INFO("round:token " << all);
  for (std::size_t i = 1; i < seen.tokens.size(); ++i) {
    if (seen.tokens[i].first == seen.tokens[i - 1].first)
      CHECK(seen.tokens[i].second >= seen.tokens[i - 1].second);
    else
      CHECK(seen.tokens[i].second > seen.tokens[i - 1].second);
  }
}

// The counter holds every commit reported applied, and at most the ones in doubt besides.
asio::awaitable<void> check_counter(sp::RedisBackend& b, std::string resource, const Seen& one,
                                    const Seen& two) {
  const sp::Entry n = co_await b.read(resource, "n");
  const int value = n.value ? n.value->get<int>() : 0;
  const int committed = one.committed + two.committed, unknown = one.unknown + two.unknown;
  INFO(fmt::format("n = {}, committed {}, unknown {}", value, committed, unknown));
  CHECK(value >= committed);
  CHECK(value <= committed + unknown);
}

std::string cluster_url() {
  return sp::test::redis_cluster_test_url();
}

struct Race {
  Seen a, b;
};

// Runs `operate` on a thread while two clients race on `resource`: phase 1 while the operator
// works, 2 once it is done (the clients must then complete 20 more rounds), 3 if it failed.
template <class Operate>
Race under_operator(const std::string& resource, sp::RedisOptions options, Operate operate) {
  Race race;
  std::atomic<int> phase{0};
  int after = 0;
  std::string failure;
  std::thread op([&] {
    try {
      phase = 1;
      operate();
      phase = 2;
    } catch (const std::exception& e) {
      failure = e.what();
      phase = 3;
    }
  });
  try {
    sp::test::run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
      sp::RedisBackend one(ex, cluster_url(), options), two(ex, cluster_url(), options);
      co_await one.register_resource(resource, sp::Value::parse(R"({"n": 0})"));
      co_await (client(one, resource, "a", phase, after, race.a) &&
                client(two, resource, "b", phase, after, race.b));
      co_await check_counter(one, resource, race.a, race.b);
    });
  } catch (...) {
    phase = 3;
    op.join();
    throw;
  }
  op.join();
  INFO(failure);
  REQUIRE(failure.empty());
  for (const Seen* seen : {&race.a, &race.b}) {
    if (!seen->errors.empty())
      WARN(fmt::format("{} retried errors, the first: {}", seen->retried,
                       fmt::join(seen->errors, " | ")));
    INFO(fmt::format("fatal errors: {}", fmt::join(seen->fatal, " | ")));
    CHECK(seen->fatal.empty());
  }
  CHECK(after >= 20);
  check_tokens(race.a, race.b);
  check_tokens(race.b, race.a);
  return race;
}

template <class Pred>
void wait_until(Pred pred, std::chrono::seconds limit, const char* what) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > until) throw std::runtime_error(what);
    std::this_thread::sleep_for(50ms);
  }
}

}  // namespace

TEST_CASE(
    "on a cluster a request over two slots is refused before anything is sent, and "
    "grouped resources commit together",
    "[redis][cluster]") {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::RedisBackend b(ex, cluster_url());
    sp::Manager<sp::RedisBackend> m(b);
    const std::string tag = sp::test::random_hex();
    // Two plain names in different slots (the tag makes them unique; the loop, apart).
    std::string x = "items-" + tag, y;
    for (int i = 0; y.empty() || sp::detail::resource_slot(y) == sp::detail::resource_slot(x); ++i)
      y = fmt::format("payment-{}-{}", tag, i);
    co_await m.register_resource(x, sp::Value::parse(R"({"n": 0})"));
    co_await m.register_resource(y, sp::Value::parse(R"({"n": 0})"));

    std::string refused;
    try {
      auto s = co_await m.session(sp::SessionOptions("agent").resource(x).resource(y));
      co_await s.write("n", 1);
      co_await s.commit();
    } catch (const sp::InvalidArgumentError& e) {
      refused = e.what();
    }
    CHECK_THAT(refused, Catch::Contains("the session spans hash slots"));
    CHECK_THAT(refused,
               Catch::Contains(fmt::format("'{}' is in slot {}", x, sp::detail::resource_slot(x))));
    CHECK_THAT(refused, Catch::Contains("nothing was sent"));
    // A commit made without a session, and a snapshot, are refused the same way.
    sp::CommitRequest req;
    req.agent_id = "agent";
    req.resources = {x, y};
    req.writes.push_back(sp::WriteOp{x, "n", sp::Value(5)});
    req.writes.push_back(sp::WriteOp{y, "n", sp::Value(5)});
    std::string commit_refused;
    try {
      co_await b.commit(req);
    } catch (const sp::InvalidArgumentError& e) {
      commit_refused = e.what();
    }
    CHECK_THAT(commit_refused, Catch::Contains("the commit spans hash slots"));
    std::string snapshot_refused;
    try {
      std::vector<std::string> both = {x, y};
      co_await b.snapshot(std::move(both));
    } catch (const sp::InvalidArgumentError& e) {
      snapshot_refused = e.what();
    }
    CHECK_THAT(snapshot_refused, Catch::Contains("the snapshot spans hash slots"));
    // Nothing changed.
    const sp::Entry nx = co_await b.read(x, "n");
    const sp::Entry ny = co_await b.read(y, "n");
    CHECK(nx.value == sp::Value(0));
    CHECK(ny.value == sp::Value(0));

    // The same two, co-located by a group, commit together in every mode.
    const std::string gx = "{order-" + tag + "}/items", gy = "{order-" + tag + "}/payment";
    co_await m.register_resource(gx, sp::Value::parse(R"({"n": 0})"));
    co_await m.register_resource(gy, sp::Value::parse(R"({"n": 0})"));
    int expected = 0;
    for (auto mode : {sp::Isolation::none, sp::Isolation::optimistic, sp::Isolation::snapshot,
                      sp::Isolation::serializable, sp::Isolation::pessimistic}) {
      auto s =
          co_await m.session(sp::SessionOptions("agent").resource(gx).resource(gy).isolation(mode));
      auto a = co_await s.read(gx, "n");
      auto c = co_await s.read(gy, "n");
      co_await s.write(gx, "n", a->get<int>() + 1);
      co_await s.write(gy, "n", c->get<int>() + 1);
      co_await s.commit();
      ++expected;
    }
    std::vector<std::string> grouped = {gx, gy};
    auto snap = co_await b.snapshot(std::move(grouped));
    CHECK(snap[0].entries.at("n").value == sp::Value(expected));
    CHECK(snap[1].entries.at("n").value == sp::Value(expected));
  });
}

TEST_CASE(
    "on a cluster a slot migrated under a running client: ASK during the migration, MOVED "
    "after it, nothing lost",
    "[redis][cluster]") {
  const std::string resource = "{migrate-" + sp::test::random_hex() + "}/counter";
  const int slot = sp::detail::resource_slot(resource);
  long long asking_before = 0;
  int target_port = 0;
  auto race = under_operator(resource, sp::RedisOptions(), [&] {
    std::this_thread::sleep_for(300ms);  // the client works on the source for a while
    const auto source = ClusterAdmin::master_of(slot);
    const auto target = ClusterAdmin::other_master(source);
    target_port = target.port;
    asking_before = ClusterAdmin::calls(target.port, "asking");
    const auto s = std::to_string(slot);
    sp::test::RedisAdmin src(source.port), dst(target.port);
    dst.command({"CLUSTER", "SETSLOT", s, "IMPORTING", source.id});
    src.command({"CLUSTER", "SETSLOT", s, "MIGRATING", target.id});
    std::this_thread::sleep_for(200ms);
    // Every key moves in one MIGRATE; the slot stays MIGRATING meanwhile, so the source answers
    // ASK for it and the client must follow to the target with ASKING.
    const auto keys = ClusterAdmin::keys_in_slot(source.port, slot);
    if (!keys.empty()) {
      std::vector<std::string> migrate;
      for (const char* word : {"MIGRATE", "127.0.0.1"}) migrate.emplace_back(word);
      migrate.push_back(std::to_string(target.port));
      for (const char* word : {"", "0", "5000", "KEYS"}) migrate.emplace_back(word);
      migrate.insert(migrate.end(), keys.begin(), keys.end());
      const auto answer = src.command(migrate);
      if (answer != "OK") throw std::runtime_error("MIGRATE: " + answer);
    }
    std::this_thread::sleep_for(400ms);
    // The slot is the target's: first the target, then the source, then every other master.
    dst.command({"CLUSTER", "SETSLOT", s, "NODE", target.id});
    src.command({"CLUSTER", "SETSLOT", s, "NODE", target.id});
    ClusterAdmin::each_master([&](const sp::test::ClusterNodeInfo& n) {
      if (n.port == source.port || n.port == target.port) return;
      sp::test::RedisAdmin(n.port).command({"CLUSTER", "SETSLOT", s, "NODE", target.id});
    });
    wait_until([&] { return ClusterAdmin::master_of(slot).port == target.port; }, 10s,
               "the slot did not move");
  });
  CHECK(ClusterAdmin::calls(target_port, "asking") > asking_before);
  CHECK(race.a.committed + race.b.committed > 20);
  CHECK(ClusterAdmin::keys_in_slot(target_port, slot).size() >= 4);
}

TEST_CASE("on a cluster a manual failover under a running client never issues a token twice",
          "[redis][cluster]") {
  const std::string resource = "{failover-" + sp::test::random_hex() + "}/counter";
  const int slot = sp::detail::resource_slot(resource);
  auto race = under_operator(resource, sp::RedisOptions(), [&] {
    std::this_thread::sleep_for(300ms);
    const auto master = ClusterAdmin::master_of(slot);
    const auto replica = ClusterAdmin::replica_of(master);
    sp::test::RedisAdmin(replica.port).command({"CLUSTER", "FAILOVER"});
    wait_until([&] { return ClusterAdmin::master_of(slot).port == replica.port; }, 20s,
               "the replica did not take over");
  });
  ClusterAdmin::wait_whole();
  CHECK(race.a.committed + race.b.committed > 20);
}

namespace {

// A master killed with SIGKILL while two clients race; its replica takes over and the old master
// comes back as a replica.
Race kill_master(sp::RedisOptions options) {
  const std::string resource = "{kill-" + sp::test::random_hex() + "}/counter";
  const int slot = sp::detail::resource_slot(resource);
  auto race = under_operator(resource, options, [&] {
    std::this_thread::sleep_for(500ms);
    const auto master = ClusterAdmin::master_of(slot);
    const auto replica = ClusterAdmin::replica_of(master);
    ClusterAdmin::kill(master.port);
    wait_until([&] { return ClusterAdmin::is_master(replica.port); }, 30s,
               "the replica did not take over");
    ClusterAdmin::restart(master.port);
  });
  ClusterAdmin::wait_whole();
  WARN(fmt::format("SIGKILL of a master: {} leases, {} commits applied, {} in doubt, {} retried",
                   race.a.tokens.size() + race.b.tokens.size(), race.a.committed + race.b.committed,
                   race.a.unknown + race.b.unknown, race.a.retried + race.b.retried));
  return race;
}

}  // namespace

TEST_CASE(
    "on a cluster a master killed with SIGKILL: with replicas_to_ack(1) no token is issued "
    "twice and no acknowledged commit is lost",
    "[redis][cluster]") {
  auto race = kill_master(sp::RedisOptions().replicas_to_ack(1).command_timeout(3s));
  CHECK(race.a.committed + race.b.committed > 20);
}

// Hidden: the same without replicas_to_ack, to see what asynchronous replication loses (run by
// hand, see docs/backends/redis.md). It may pass: the loss needs a write the replica had not
// received when the master died.
TEST_CASE("on a cluster a master killed with SIGKILL, without replicas_to_ack",
          "[.][redis][cluster][unsafe]") {
  kill_master(sp::RedisOptions().command_timeout(3s));
}

TEST_CASE("replicas_to_ack that the replicas cannot meet never reports success",
          "[redis][cluster]") {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    // Each master has one replica: two never confirm.
    sp::RedisBackend b(ex, cluster_url(),
                       sp::RedisOptions().replicas_to_ack(2).replica_ack_timeout(50ms));
    const std::string r = "{acks-" + sp::test::random_hex() + "}/r";
    std::string what;
    try {
      co_await b.register_resource(r, sp::Value::parse(R"({"n": 0})"));
    } catch (const sp::BackendUnavailableError& e) {
      what = e.what();
    }
    CHECK_THAT(what, Catch::Contains("only 1 of the 2 replicas") &&
                         Catch::Contains("confirmed the registration"));
    // The registration happened on the master; it is only not confirmed.
    sp::RedisBackend plain(ex, cluster_url());
    const sp::Entry registered = co_await plain.read(r, "n");
    CHECK(registered.value == sp::Value(0));

    bool acquire_failed = false;
    try {
      co_await b.acquire_lease(r, "owner", 10s);
    } catch (const sp::BackendUnavailableError& e) {
      acquire_failed = e.retryable();
    }
    CHECK(acquire_failed);
    // Acquiring again as the same owner is safe: the same lease, the same token.
    const sp::Lease held = co_await plain.acquire_lease(r, "owner", 10s);
    CHECK(held.token == 1);

    sp::CommitRequest req;
    req.agent_id = "agent";
    req.resources = {r};
    req.idempotency_key = "k-" + sp::test::random_hex();
    req.fences.push_back(sp::FenceCheck{r, held.token});
    req.writes.push_back(sp::WriteOp{r, "n", sp::Value(1)});
    req.fingerprint = sp::detail::fingerprint(req.resources, req.writes);
    bool unknown = false, retryable = false;
    try {
      co_await b.commit(req);
    } catch (const sp::CommitUnknownError& e) {
      unknown = true;
      retryable = e.retryable();
    }
    CHECK(unknown);
    CHECK(retryable);  // it carries an idempotency key
    // A refusal changed nothing and needs no confirmation: it is reported as it is.
    co_await plain.revoke_lease(r);
    sp::CommitRequest stale = req;
    stale.idempotency_key.reset();
    bool lost = false;
    try {
      co_await b.commit(stale);
    } catch (const sp::LeaseLostError&) {
      lost = true;
    }
    CHECK(lost);
    // Reads need no confirmation.
    const sp::Entry written = co_await b.read(r, "n");
    CHECK(written.value == sp::Value(1));
  });
}

TEST_CASE("check_server on a cluster reads every node", "[redis][cluster]") {
  ClusterAdmin::wait_whole();  // an earlier test may have just brought a node back
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::RedisBackend waits(ex, cluster_url(), sp::RedisOptions().replicas_to_ack(1));
    const sp::RedisServerCheck safe = co_await waits.check_server();
    // Six nodes, four settings each, named by node; the test cluster is set up safely.
    CHECK(safe.settings.size() == 24);
    for (const auto& s : safe.settings) {
      INFO(s.setting << " = " << s.value << ": " << s.advice);
      CHECK(s.ok);
      CHECK_THAT(s.setting, Catch::StartsWith("127.0.0.1:"));
    }
    // Without waiting for the replicas, each master's replication is the risk it reports.
    sp::RedisBackend plain(ex, cluster_url());
    const sp::RedisServerCheck risky = co_await plain.check_server();
    int unsafe = 0;
    for (const auto& s : risky.settings)
      if (!s.ok) {
        ++unsafe;
        CHECK_THAT(s.setting, Catch::EndsWith(" replication"));
        CHECK_THAT(s.advice, Catch::Contains("replicas_to_ack(1)"));
      }
    CHECK(unsafe == 3);
  });
}

TEST_CASE("on a cluster the key layout upgrade refuses earlier keys and changes nothing",
          "[redis][cluster]") {
  // Earlier versions keyed "{order-1}/x" as "<prefix>:fence:{<hex name>}": another slot than its
  // grouped form's, so no one script can move it here.
  const std::string prefix = "cupgrade-" + sp::test::random_hex();
  const std::string old_key = prefix + ":fence:{7b6f726465722d317d2f78}";  // "{order-1}/x"
  const int port = ClusterAdmin::master_of(sp::detail::key_slot(old_key)).port;
  sp::test::RedisAdmin node(port);
  REQUIRE(node.command({"SET", old_key, "7"}) == "OK");
  sp::test::run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::RedisBackend b(ex, cluster_url(), sp::RedisOptions().key_prefix(prefix));
    bool refused = false;
    try {
      co_await b.upgrade_key_layout();
    } catch (const sp::InvalidArgumentError& e) {
      refused = std::string(e.what()).find("'{order-1}/x'") != std::string::npos;
    }
    CHECK(refused);
  });
  CHECK(node.command({"GET", old_key}) == "7");
  node.command({"DEL", old_key});
}
