// The observer hears each event kind where it happens, with the right outcome, on the memory
// backend; and an observer that throws changes nothing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <statepact/statepact.hpp>
#include <statepact/testing/manual_clock.hpp>

#include "../support/expect.hpp"
#include "../support/faulty_backend.hpp"
#include "../support/run.hpp"
#include "../support/sleep.hpp"

namespace sp = statepact;
using namespace std::chrono_literals;

namespace {

// Copies what it hears (the views die with the call); safe across threads.
class Recorder : public sp::Observer {
 public:
  struct LeaseSeen {
    sp::LeaseEvent event;
    std::string resource, owner;
    sp::Token token;
  };
  struct CommitSeen {
    sp::CommitOutcome outcome;
    std::string agent;
    std::size_t resources, writes;
    bool resend;
  };

  void on_lease(const sp::LeaseEventInfo& e) override {
    std::lock_guard g(mu_);
    leases.push_back({e.event, std::string(e.resource), std::string(e.owner), e.token});
  }
  void on_commit(const sp::CommitEventInfo& e) override {
    std::lock_guard g(mu_);
    commits.push_back({e.outcome, std::string(e.agent_id), e.resources, e.writes, e.resend});
  }
  void on_retry(const sp::RetryEventInfo& e) override {
    std::lock_guard g(mu_);
    retries.push_back(e);
    retries.back().agent_id = {};  // the view would dangle
  }
  void on_lock_wait(const sp::LockWaitInfo& e) override {
    std::lock_guard g(mu_);
    locks.push_back({e.mode, e.outcome, e.duration});
  }

  std::vector<sp::LeaseEvent> lease_events() const {
    std::lock_guard g(mu_);
    std::vector<sp::LeaseEvent> out;
    for (const auto& l : leases) out.push_back(l.event);
    return out;
  }
  std::vector<sp::CommitOutcome> outcomes() const {
    std::lock_guard g(mu_);
    std::vector<sp::CommitOutcome> out;
    for (const auto& c : commits) out.push_back(c.outcome);
    return out;
  }
  bool heard(sp::LeaseEvent e) const {
    auto all = lease_events();
    return std::find(all.begin(), all.end(), e) != all.end();
  }

  struct LockSeen {
    sp::LockMode mode;
    sp::LockOutcome outcome;
    sp::steady_duration duration;
  };
  std::vector<LeaseSeen> leases;
  std::vector<CommitSeen> commits;
  std::vector<sp::RetryEventInfo> retries;
  std::vector<LockSeen> locks;

 private:
  mutable std::mutex mu_;
};

struct Throwing : sp::Observer {
  int calls = 0;
  void on_lease(const sp::LeaseEventInfo&) override { fail(); }
  void on_commit(const sp::CommitEventInfo&) override { fail(); }
  void on_retry(const sp::RetryEventInfo&) override { fail(); }
  void on_lock_wait(const sp::LockWaitInfo&) override { fail(); }
  void fail() {
    ++calls;
    throw std::runtime_error("observer failed");
  }
};

using E = sp::LeaseEvent;
using C = sp::CommitOutcome;

}  // namespace

TEST_CASE(
    "observer: Manager::lease and LeaseManager report acquired, not available, released, "
    "lost",
    "[observer]") {
  sp::testing::ManualClock clock;
  sp::MemoryBackend backend(sp::MemoryOptions().clock(clock.source()));
  Recorder rec;
  sp::Manager manager(backend);
  manager.set_observer(&rec);
  sp::LeaseManager leases(backend, 30s);
  leases.set_observer(&rec);
  sp::test::run([&](asio::any_io_executor) -> asio::awaitable<void> {
    auto a = co_await manager.lease("job-1", "worker-a", 10s);
    auto refused = co_await sp::test::thrown<sp::LeaseNotAvailableError>(
        [&] { return manager.lease("job-1", "worker-b", 10s); });
    CHECK(refused);
    // A waiting acquire that runs out reports one not_available, not one per attempt.
    auto waited = co_await sp::test::thrown<sp::LeaseNotAvailableError>(
        [&] { return leases.acquire("job-1", "worker-c", 10s, 30ms); });
    CHECK(waited);
    co_await leases.hold("job-2", "worker-a",
                         [](const sp::Lease&) -> asio::awaitable<void> { co_return; });
    clock.advance(11s);  // worker-a's lease on job-1 expires; worker-b takes over
    auto b = co_await leases.acquire("job-1", "worker-b");
    CHECK(b.token == a.token + 1);
    auto lost = co_await sp::test::thrown<sp::LeaseLostError>([&] { return leases.guard(a); });
    CHECK(lost);
    co_await leases.guard(b);  // current: nothing to report
  });
  REQUIRE(rec.lease_events() == std::vector<E>{E::acquired, E::not_available, E::not_available,
                                               E::acquired, E::released, E::acquired, E::lost});
  CHECK(rec.leases[0].resource == "job-1");
  CHECK(rec.leases[0].owner == "worker-a");
  CHECK(rec.leases[0].token == 1);
  CHECK(rec.leases[1].owner == "worker-b");
  CHECK(rec.leases[1].token == 0);
  CHECK(rec.leases[2].owner == "worker-c");
  CHECK(rec.leases[4].resource == "job-2");
  CHECK(rec.leases[6].owner == "worker-a");
  CHECK(rec.leases[6].token == 1);
}

TEST_CASE("observer: LeaseManager::revoke reports the lease it ended, and nothing when none",
          "[observer]") {
  sp::MemoryBackend backend;
  Recorder rec;
  sp::LeaseManager leases(backend, 30s);
  leases.set_observer(&rec);
  sp::Lease a;
  std::optional<sp::RevokedLease> revoked, again;
  sp::test::run([&](asio::any_io_executor) -> asio::awaitable<void> {
    a = co_await leases.lease("job-3", "worker-a");
    revoked = co_await leases.revoke("job-3");
    again = co_await leases.revoke("job-3");
  });
  REQUIRE(revoked);
  CHECK(revoked->lease.token == a.token);
  CHECK(revoked->fence == a.token + 1);
  CHECK_FALSE(again);
  REQUIRE(rec.lease_events() == std::vector<E>{E::acquired, E::revoked});
  CHECK(rec.leases[1].resource == "job-3");
  CHECK(rec.leases[1].owner == "worker-a");
  CHECK(rec.leases[1].token == 1);
}

TEST_CASE("observer: hold reports renewals, a failed renewal and the loss of its lease",
          "[observer]") {
  sp::testing::ManualClock clock;
  sp::MemoryBackend memory(sp::MemoryOptions().clock(clock.source()));
  sp::test::FaultyBackend faulty(memory);
  faulty.renewals_failing = 1;  // the first renewal fails for a passing reason
  Recorder rec;
  sp::LeaseManager leases(faulty, 2s);
  leases.set_observer(&rec);
  auto lost = sp::test::expect_throw<sp::LeaseLostError>([&](asio::any_io_executor) {
    auto body = [&](const sp::Lease&) -> asio::awaitable<void> {
      co_await sp::test::eventually([&] { return rec.heard(E::renewed); }, 10s, "a renewal");
      clock.advance(3s);                  // the lease expires behind the worker's back
      co_await sp::test::sleep_for(10s);  // cancelled once the renewal finds it lost
    };
    return leases.hold("job-3", "worker-a", body,
                       sp::HoldOptions().auto_renew(true).renew_every(20ms));
  });
  CHECK(lost.resource() == "job-3");
  const auto events = rec.lease_events();
  REQUIRE(events.size() >= 4);
  CHECK(events[0] == E::acquired);
  CHECK(events[1] == E::renewal_failed);
  CHECK(events[2] == E::renewed);
  CHECK(std::count(events.begin(), events.end(), E::renewal_failed) == 1);
  CHECK(std::count(events.begin(), events.end(), E::lost) == 1);
  CHECK(std::find(events.begin(), events.end(), E::lost) > events.begin() + 2);
}

TEST_CASE("observer: commits report applied, conflict, fenced off, replayed", "[observer]") {
  sp::testing::ManualClock clock;
  sp::MemoryBackend backend(sp::MemoryOptions().clock(clock.source()));
  Recorder rec;
  sp::Manager manager(backend);
  manager.set_observer(&rec);
  sp::test::run([&](asio::any_io_executor) -> asio::awaitable<void> {
    co_await manager.register_resource("stock");
    auto first = co_await manager.session(sp::SessionOptions("agent-1").resource("stock"));
    co_await first.read("count");
    auto second = co_await manager.session(sp::SessionOptions("agent-2").resource("stock"));
    co_await second.write("count", 1);
    co_await second.write("note", "x");
    co_await second.commit();  // applied
    co_await first.write("count", 2);
    auto conflict =
        co_await sp::test::thrown<sp::ConflictError>([&] { return first.commit(); });  // conflict
    CHECK(conflict);

    auto old = co_await manager.lease("job-4", "worker-a", 1s);
    clock.advance(2s);
    co_await manager.lease("job-4", "worker-b", 1s);
    auto stale =
        co_await manager.session(sp::SessionOptions("worker-a").resource("job-4").fence(old));
    co_await stale.write("status", "done");
    auto fenced =
        co_await sp::test::thrown<sp::LeaseLostError>([&] { return stale.commit(); });  // fenced
    CHECK(fenced);

    for (int i = 0; i < 2; ++i) {  // the second is a replay of the first
      auto s = co_await manager.session(
          sp::SessionOptions("agent-3").resource("stock").idempotency_key("order-7"));
      co_await s.write("order-7", "reserved");
      co_await s.commit();
    }
  });
  REQUIRE(rec.outcomes() ==
          std::vector<C>{C::applied, C::conflict, C::fenced_off, C::applied, C::replayed});
  CHECK(rec.commits[0].agent == "agent-2");
  CHECK(rec.commits[0].resources == 1);
  CHECK(rec.commits[0].writes == 2);
  CHECK(rec.commits[2].agent == "worker-a");
  CHECK_FALSE(rec.commits[4].resend);
}

TEST_CASE("observer: run reports retries, and a commit of unknown outcome resolved by a replay",
          "[observer]") {
  sp::MemoryBackend memory;
  sp::test::FaultyBackend faulty(memory);
  Recorder rec;
  sp::Manager manager(faulty);
  manager.set_observer(&rec);
  const auto fast = sp::RetryPolicy().initial_backoff(1ms).max_backoff(2ms);
  sp::test::run([&](asio::any_io_executor) -> asio::awaitable<void> {
    co_await manager.register_resource("stock");
    int attempts = 0;
    co_await manager.run(
        sp::SessionOptions("agent-1").resource("stock"),
        [&](sp::Session<sp::test::FaultyBackend<sp::MemoryBackend>>& s) -> asio::awaitable<void> {
          co_await s.read("count");
          if (++attempts == 1) {  // someone else writes between our read and our commit
            auto other = co_await manager.session(sp::SessionOptions("agent-2").resource("stock"));
            co_await other.write("count", 5);
            co_await other.commit();
          }
          co_await s.write("count", 6);
        },
        fast);
    CHECK(attempts == 2);

    faulty.commits_applied_then_unknown = 1;
    co_await manager.run(
        sp::SessionOptions("agent-3").resource("stock").idempotency_key("order-8"),
        [](sp::Session<sp::test::FaultyBackend<sp::MemoryBackend>>& s) -> asio::awaitable<void> {
          co_await s.write("order-8", "reserved");
        },
        fast);
  });
  REQUIRE(rec.outcomes() ==
          std::vector<C>{C::applied, C::conflict, C::applied, C::unknown, C::replayed});
  CHECK(rec.commits[4].resend);
  REQUIRE(rec.retries.size() == 2);
  CHECK(rec.retries[0].attempt == 1);
  CHECK(rec.retries[0].reason == sp::ErrorCode::conflict);
  CHECK(rec.retries[0].backoff <= 1ms);
  CHECK(rec.retries[1].attempt == 1);
  CHECK(rec.retries[1].reason == sp::ErrorCode::commit_unknown);
}

TEST_CASE("observer: pessimistic lock waits report granted and timed-out locks", "[observer]") {
  sp::MemoryBackend backend;
  Recorder rec;
  sp::Manager manager(backend);
  manager.set_observer(&rec);
  sp::test::run([&](asio::any_io_executor) -> asio::awaitable<void> {
    co_await manager.register_resource("stock");
    const auto opts = sp::SessionOptions("agent-1")
                          .resource("stock")
                          .isolation(sp::Isolation::pessimistic)
                          .lock_timeout(30ms);
    auto holder = co_await manager.session(opts);
    co_await holder.read_for_update("count");
    co_await holder.read_for_update("count");  // held already: storage is not asked again
    auto waiter = co_await manager.session(opts);
    auto timeout =
        co_await sp::test::thrown<sp::LockTimeoutError>([&] { return waiter.read("count"); });
    CHECK(timeout);
  });
  REQUIRE(rec.locks.size() == 2);
  CHECK(rec.locks[0].mode == sp::LockMode::exclusive);
  CHECK(rec.locks[0].outcome == sp::LockOutcome::acquired);
  CHECK(rec.locks[1].mode == sp::LockMode::shared);
  CHECK(rec.locks[1].outcome == sp::LockOutcome::timeout);
  CHECK(rec.locks[1].duration >= 25ms);
}

TEST_CASE("observer: an observer that throws changes nothing", "[observer]") {
  sp::MemoryBackend backend;
  Throwing obs;
  sp::Manager manager(backend);
  manager.set_observer(&obs);
  sp::LeaseManager leases(backend, 30s);
  leases.set_observer(&obs);
  sp::test::run([&](asio::any_io_executor) -> asio::awaitable<void> {
    auto lease = co_await manager.lease("job-5", "worker-a", 30s);
    CHECK(lease.token == 1);
    auto refused = co_await sp::test::thrown<sp::LeaseNotAvailableError>(
        [&] { return leases.acquire("job-5", "worker-b"); });
    CHECK(refused);
    int attempts = 0;
    auto version = co_await manager.run(
        sp::SessionOptions("agent-1").resource("job-5").fence(lease),
        [&](sp::Session<sp::MemoryBackend>& s) -> asio::awaitable<sp::Version> {
          ++attempts;
          co_await s.write("status", "running");
          auto r = co_await s.commit();
          co_return r.versions.at("job-5");
        });
    CHECK(attempts == 1);
    CHECK(version == 1);
    auto stored = co_await backend.read("job-5", "status");
    CHECK(stored.value == sp::Value("running"));
  });
  CHECK(obs.calls == 3);  // acquired, not_available, applied: each heard, each thrown and dropped
}
