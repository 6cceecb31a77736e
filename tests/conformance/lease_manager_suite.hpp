// LeaseManager on any backend: hold() on every exit path, renewal and its failure, waiting
// acquisition, and many coroutines on several threads contending for leases.
#pragma once

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <numeric>
#include <set>
#include <type_traits>
#include <vector>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/experimental/parallel_group.hpp>
#include <asio/post.hpp>

#include <catch2/catch.hpp>

#include "../support/expect.hpp"
#include "../support/run.hpp"
#include "../support/sleep.hpp"
#include "../support/slow_backend.hpp"
#include "../support/workers.hpp"
#include "fixture.hpp"

namespace sp = statepact;

TEMPLATE_LIST_TEST_CASE("hold releases the lease on normal exit and on exception",
                        "[conformance][hold]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    TestType fx(ex);
    sp::LeaseManager<typename TestType::backend_type> leases(fx.backend(), 30s);
    const sp::Token expected = 1;  // each round has its own resource
    for (bool renew : {false, true}) {
      INFO("auto_renew " << renew);
      const auto r = fx.resource(renew ? "hold-exits-renewed" : "hold-exits");
      sp::Token seen = 0;
      auto body = [&](const sp::Lease& l) -> asio::awaitable<int> {
        seen = l.token;
        co_return 42;
      };
      int v = co_await leases.hold(r, "worker-a", body, sp::HoldOptions().auto_renew(renew));
      CHECK(v == 42);
      CHECK(seen == expected);
      auto next = co_await fx.backend().acquire_lease(r, "worker-b", 30s);  // released: free now
      CHECK(next.token == expected + 1);
      auto awaited1 = co_await fx.backend().release_lease(next);
      CHECK(awaited1);

      auto failing = [&](const sp::Lease& l) -> asio::awaitable<void> {
        seen = l.token;
        throw std::runtime_error("job failed");
        co_return;
      };
      auto err = co_await sp::test::thrown<std::runtime_error>(
          [&] { return leases.hold(r, "worker-a", failing, sp::HoldOptions().auto_renew(renew)); });
      REQUIRE(err);
      CHECK(std::string(err->what()) == "job failed");
      CHECK(seen == expected + 2);
      auto after = co_await fx.backend().acquire_lease(r, "worker-b", 30s);  // released again
      CHECK(after.token == expected + 3);
    }
  });
}

TEMPLATE_LIST_TEST_CASE("hold releases the lease when cancelled", "[conformance][hold]",
                        ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    TestType fx(ex);
    sp::LeaseManager<typename TestType::backend_type> leases(fx.backend(), 30s);
    const auto r = fx.resource("hold-cancel");
    for (bool renew : {false, true}) {
      std::atomic<bool> started{false};
      auto body = [&](const sp::Lease&) -> asio::awaitable<void> {
        started = true;
        co_await sp::test::sleep_for(60s);
      };
      asio::cancellation_signal stop;
      std::exception_ptr hold_error;
      bool finished = false;
      asio::co_spawn(ex, leases.hold(r, "worker-a", body, sp::HoldOptions().auto_renew(renew)),
                     asio::bind_cancellation_slot(stop.slot(), [&](std::exception_ptr e) {
                       hold_error = e;
                       finished = true;
                     }));
      co_await sp::test::eventually([&] { return started.load(); }, 10s, "the body to start");
      stop.emit(asio::cancellation_type::terminal);
      co_await sp::test::eventually([&] { return finished; }, 10s, "hold to end");
      CHECK(hold_error != nullptr);  // the body was cancelled, and hold says so
      auto other = co_await fx.backend().acquire_lease(r, "worker-b", 30s);  // and released
      auto awaited2 = co_await fx.backend().release_lease(other);
      CHECK(awaited2);
    }
  });
}

TEMPLATE_LIST_TEST_CASE("auto_renew with its default interval keeps the lease alive past its ttl",
                        "[conformance][hold]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    TestType fx(ex);
    // The default interval is a third of the ttl: renewals come every 300 ms of real time, with
    // twice that as slack before an unrenewed lease would expire (backends with a real clock).
    const auto ttl = 900ms;
    sp::LeaseManager<typename TestType::backend_type> leases(fx.backend(), ttl);
    const auto r = fx.resource("hold-renew");
    bool refused = false;
    int renewals = 0;
    auto body = [&](sp::HeldLease& h) -> asio::awaitable<void> {
      for (int i = 0; i < 3; ++i) {  // 1.5 ttl in all: an unrenewed lease would have expired
        const auto before = h.lease().expires_at;
        co_await fx.advance(ttl / 2);
        co_await sp::test::eventually([&] { return h.lease().expires_at > before; }, 10s,
                                      "a renewal at the default interval");
        ++renewals;
      }
      try {
        co_await fx.backend().acquire_lease(r, "worker-b", ttl);
      } catch (const sp::LeaseNotAvailableError&) {
        refused = true;
      }
      CHECK(!h.lost());
    };
    co_await leases.hold(r, "worker-a", body, sp::HoldOptions().auto_renew(true));
    CHECK(renewals == 3);
    CHECK(refused);
    auto fence = co_await fx.backend().current_fence(r);
    CHECK(fence == 1);  // one lease all along
  });
}

namespace conformance {

// Storage whose leases expire as real time passes: a server backend's own, and for memory a backend
// on the system clock (the memory fixture's clock moves only when a test advances it).
template <class F>
typename F::backend_type& real_time_storage(F& fx, std::unique_ptr<sp::MemoryBackend>& own) {
  if constexpr (std::is_same_v<typename F::backend_type, sp::MemoryBackend>) {
    own = std::make_unique<sp::MemoryBackend>();
    return *own;
  } else {
    return fx.backend();
  }
}

// A way for hold()'s replies to come late, and how its body waits for the loss.
struct LateReplies {
  const char* name;
  sp::milliseconds acquire_delay;
  sp::milliseconds renew_delay;
  int renewals_failing;
  bool auto_renew;
  bool cancel_on_loss;
  bool lost;          // hold() must throw LeaseLostError (else: the lease outlives the body)
  bool nested_cause;  // the LeaseLostError must carry the renewals' last failure
};

}  // namespace conformance

TEMPLATE_LIST_TEST_CASE("hold tells its body of the loss before another owner can take the lease",
                        "[conformance][hold][deadline]", ConformanceFixtures) {
  using steady = std::chrono::steady_clock;
  const auto ttl = 1000ms;
  // Each would leave the body running, untold, past the moment storage let worker-b in, if the
  // local deadline were counted from a reply, had no margin, or waited for a renewal's answer.
  static const conformance::LateReplies cases[] = {
      // The first renewal is due a third of the ttl after the send: at once when the reply comes.
      {"the acquire's reply comes late, after the first renewal was due", 800ms, 0ms, 0, true, true,
       false, false},
      {"the acquire's reply comes late and nothing renews", 300ms, 0ms, 0, false, false, true,
       false},
      {"a renewal is applied but its reply comes after the ttl", 0ms, 2000ms, 0, true, false, true,
       false},
      {"renewals fail, each after half the ttl", 0ms, 500ms, 1000, true, true, true, true},
  };
  const auto& c = cases[GENERATE(0, 1, 2, 3)];
  INFO(c.name);
  std::exception_ptr hold_error;
  bool taken = false, untold = false;
  steady::time_point t0{}, taken_at{}, body_ended{};
  sp::test::run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    TestType fx(ex);
    std::unique_ptr<sp::MemoryBackend> own;
    auto& storage = conformance::real_time_storage(fx, own);
    using B = std::remove_reference_t<decltype(storage)>;
    sp::test::SlowBackend<B> slow(storage);
    slow.acquire_delay = c.acquire_delay;
    slow.renew_delay = c.renew_delay;
    slow.renewals_failing = c.renewals_failing;
    sp::LeaseManager<sp::test::SlowBackend<B>> first(slow, ttl);
    sp::LeaseManager<B> second(storage, ttl);
    const auto r = fx.resource("hold-deadline");
    bool running = false;
    const sp::HeldLease* handle = nullptr;
    t0 = steady::now();
    auto body = [&](sp::HeldLease& held) -> asio::awaitable<void> {
      handle = &held;
      running = true;
      struct Ended {  // however the body ends: returned, cancelled
        bool& running;
        steady::time_point& at;
        ~Ended() {
          running = false;
          at = steady::now();
        }
      } ended{running, body_ended};
      if (c.cancel_on_loss) {
        co_await sp::test::sleep_for(2 * ttl);  // cancelled at a loss
      } else {
        while (!held.lost() && steady::now() - t0 < 2 * ttl) co_await sp::test::sleep_for(1ms);
      }
    };
    auto holder = [&]() -> asio::awaitable<void> {
      co_await first.hold(
          r, "worker-a", body,
          sp::HoldOptions().auto_renew(c.auto_renew).cancel_on_loss(c.cancel_on_loss));
    };
    // worker-b polls from the moment storage holds worker-a's lease until it gets the lease.
    auto other = [&]() -> asio::awaitable<void> {
      co_await sp::test::eventually([&] { return !slow.acquires_applied.empty(); }, 10s,
                                    "worker-a's acquisition");
      while (steady::now() - t0 < 10 * ttl) {
        auto got = co_await second.try_acquire(r, "worker-b", 30s);
        if (got) {
          taken_at = steady::now();
          taken = true;
          untold = running && !handle->lost();
          co_await second.release(*got);
          co_return;
        }
        co_await sp::test::sleep_for(2ms);
      }
    };
    auto [order, e1, e2] = co_await asio::experimental::make_parallel_group(
                               asio::co_spawn(ex, holder(), asio::experimental::deferred),
                               asio::co_spawn(ex, other(), asio::experimental::deferred))
                               .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
    hold_error = e1;
    if (e2) std::rethrow_exception(e2);
  });
  using ms = std::chrono::milliseconds;
  INFO("worker-b took the lease at "
       << std::chrono::duration_cast<ms>(taken_at - t0).count() << " ms; the body ended at "
       << std::chrono::duration_cast<ms>(body_ended - t0).count() << " ms");
  REQUIRE(taken);
  // When worker-b's acquisition completed, the body had ended or had been told (lost() true).
  CHECK_FALSE(untold);
  bool lost = false, nested = false;
  if (hold_error) {
    try {
      std::rethrow_exception(hold_error);
    } catch (const sp::LeaseLostError& e) {
      lost = true;
      try {
        std::rethrow_if_nested(e);
      } catch (const std::runtime_error& cause) {
        nested = std::string(cause.what()).find("LOADING") == 0;
      }
    } catch (...) {
    }
  }
  CHECK(lost == c.lost);
  if (!c.lost) CHECK(hold_error == nullptr);
  CHECK(nested == c.nested_cause);
}

TEMPLATE_LIST_TEST_CASE("hold renews every third of the ttl by default", "[conformance][hold]",
                        ConformanceFixtures) {
  using steady = std::chrono::steady_clock;
  const auto ttl = 600ms, every = ttl / 3;
  std::vector<steady::time_point> sent;
  sp::test::run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    TestType fx(ex);
    using B = typename TestType::backend_type;
    sp::test::SlowBackend<B> counting(fx.backend());
    sp::LeaseManager<sp::test::SlowBackend<B>> leases(counting, ttl);
    auto body = [&](const sp::Lease&) -> asio::awaitable<void> {
      co_await sp::test::sleep_for(1500ms);
    };
    co_await leases.hold(fx.resource("hold-interval"), "worker-a", body,
                         sp::HoldOptions().auto_renew(true));
    sent.push_back(counting.acquires_sent.back());
    sent.insert(sent.end(), counting.renewals_started.begin(), counting.renewals_started.end());
  });
  // Renewals (the acquisition first) are sent every 200 ms: never sooner, and on average not
  // much later, whatever a renewal's round trip took.
  INFO("sends: " << sent.size());
  REQUIRE(sent.size() >= 5);
  std::vector<sp::milliseconds> gaps;
  for (std::size_t i = 1; i < sent.size(); ++i)
    gaps.push_back(std::chrono::duration_cast<sp::milliseconds>(sent[i] - sent[i - 1]));
  for (auto g : gaps) {
    INFO("gap " << g.count() << " ms");
    CHECK(g >= every - 2ms);
  }
  const auto mean = std::accumulate(gaps.begin(), gaps.end(), 0ms) / static_cast<long>(gaps.size());
  INFO("mean gap " << mean.count() << " ms");
  CHECK(mean <= every * 5 / 4);
}

TEMPLATE_LIST_TEST_CASE("a lost renewal cancels the body and is rethrown from hold",
                        "[conformance][hold]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    TestType fx(ex);
    const auto ttl = fx.short_ttl();
    auto& b = fx.backend();
    sp::LeaseManager<typename TestType::backend_type> leases(b, ttl);
    const auto r = fx.resource("hold-lost");
    sp::Token taken_over = 0;
    bool body_finished = false;
    // An operator releases the lease and worker-b takes over: the next renewal must fail.
    auto body = [&](sp::HeldLease& h) -> asio::awaitable<void> {
      auto awaited3 = co_await b.release_lease(h.lease());
      CHECK(awaited3);
      auto takeover = co_await b.acquire_lease(r, "worker-b", 30s);
      taken_over = takeover.token;
      co_await sp::test::sleep_for(30s);  // cancelled long before this
      body_finished = true;
    };
    const auto started = std::chrono::steady_clock::now();
    auto lost = co_await sp::test::thrown<sp::LeaseLostError>(
        [&] { return leases.hold(r, "worker-a", body, sp::HoldOptions().auto_renew(true)); });
    REQUIRE(lost);
    CHECK(lost->token() == 1);
    CHECK(taken_over == 2);
    CHECK(!body_finished);
    CHECK(std::chrono::steady_clock::now() - started < 10s);
    // worker-b's lease was not touched by worker-a's cleanup.
    auto awaited4 = co_await b.current_fence(r);
    CHECK(awaited4 == 2);
    auto awaited5 = co_await sp::test::thrown<sp::LeaseNotAvailableError>(
        [&] { return b.acquire_lease(r, "worker-c", 30s); });
    CHECK(awaited5);

    // Without cancellation, the body sees the loss on its handle and stops by itself.
    const auto r2 = fx.resource("hold-lost-poll");
    bool noticed = false;
    auto polling = [&](sp::HeldLease& h) -> asio::awaitable<void> {
      auto awaited6 = co_await b.release_lease(h.lease());
      CHECK(awaited6);
      co_await b.acquire_lease(r2, "worker-b", 30s);
      co_await sp::test::eventually([&] { return h.lost(); }, 10s, "the loss");
      noticed = h.lost();
      CHECK_THROWS_AS(h.check(), sp::LeaseLostError);
    };
    auto awaited7 = co_await sp::test::thrown<sp::LeaseLostError>([&] {
      return leases.hold(r2, "worker-a", polling,
                         sp::HoldOptions().auto_renew(true).cancel_on_loss(false));
    });
    CHECK(awaited7);
    CHECK(noticed);
  });
}

TEMPLATE_LIST_TEST_CASE("acquire can wait for a busy lease until a deadline", "[conformance][hold]",
                        ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    TestType fx(ex);
    auto& b = fx.backend();
    sp::LeaseManager<typename TestType::backend_type> leases(b, 30s);
    const auto r = fx.resource("wait");
    auto a = co_await b.acquire_lease(r, "worker-a", 30s);
    // Nobody releases: the wait ends at its deadline with the holder named.
    const auto t0 = std::chrono::steady_clock::now();
    auto busy = co_await sp::test::thrown<sp::LeaseNotAvailableError>(
        [&] { return leases.acquire(r, "worker-b", std::nullopt, 150ms); });
    REQUIRE(busy);
    CHECK(busy->holder() == "worker-a");
    CHECK(std::chrono::steady_clock::now() - t0 >= 150ms);
    // The holder releases a little later: the waiter gets the next token.
    auto releaser = [&]() -> asio::awaitable<void> {
      co_await sp::test::sleep_for(50ms);
      co_await b.release_lease(a);
    };
    auto [order, e1, got, e2] =
        co_await asio::experimental::make_parallel_group(
            asio::co_spawn(ex, leases.acquire(r, "worker-b", std::nullopt, 5000ms),
                           asio::experimental::deferred),
            asio::co_spawn(ex, releaser(), asio::experimental::deferred))
            .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
    CHECK(e1 == nullptr);
    CHECK(e2 == nullptr);
    CHECK(got.owner == "worker-b");
    CHECK(got.token == a.token + 1);
  });
}

TEMPLATE_LIST_TEST_CASE("contending workers on several threads: one owner at a time, no reuse",
                        "[conformance][concurrency]", ConformanceFixtures) {
  constexpr int workers = 12, rounds = 15;
  std::atomic<int> holders{0}, max_holders{0}, commits{0};
  std::mutex mu;
  std::vector<sp::Token> tokens;
  sp::test::run(
      [&](asio::any_io_executor ex) -> asio::awaitable<void> {
        TestType fx(ex);
        using B = typename TestType::backend_type;
        sp::Manager<B> manager(fx.backend());
        sp::LeaseManager<B> leases(fx.backend(), 30s);
        const auto r = fx.resource("contended");
        co_await manager.register_resource(r, sp::Value::object());
        auto worker = [](sp::Manager<B>& m, sp::LeaseManager<B>& l, std::string res, int id,
                         std::atomic<int>& h, std::atomic<int>& mh, std::atomic<int>& c,
                         std::mutex& mtx, std::vector<sp::Token>& toks) -> asio::awaitable<void> {
          const std::string owner = "worker-" + std::to_string(id);
          for (int i = 0; i < rounds; ++i) {
            auto lease = co_await l.acquire(res, owner, std::nullopt, 60s);
            int now = ++h;
            int prev = mh.load();
            while (now > prev && !mh.compare_exchange_weak(prev, now)) {
            }
            {
              std::lock_guard g(mtx);
              toks.push_back(lease.token);
            }
            auto s = co_await m.session(sp::SessionOptions(owner).resource(res).fence(lease.token));
            co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
            co_await s.write("holder", owner);
            co_await s.commit();
            ++c;
            --h;
            co_await m.backend().release_lease(lease);
          }
        };
        sp::test::Workers pool(ex);
        for (int id = 0; id < workers; ++id)
          pool.spawn(worker(manager, leases, r, id, holders, max_holders, commits, mu, tokens));
        co_await pool.join(120s, "contending workers");
      },
      2);
  CHECK(max_holders.load() == 1);
  CHECK(commits.load() == workers * rounds);
  std::sort(tokens.begin(), tokens.end());
  REQUIRE(tokens.size() == static_cast<std::size_t>(workers * rounds));
  for (std::size_t i = 0; i < tokens.size(); ++i) CHECK(tokens[i] == i + 1);  // each once, no gaps
}

namespace conformance {

// What the paused-owner test records, in one process's steady time.
struct Acquired {
  sp::Token token;
  std::chrono::steady_clock::time_point done;  // when acquire returned
};
struct CommitAttempt {
  sp::Token token;
  std::chrono::steady_clock::time_point invoked;  // before the first attempt was sent
  bool landed;
};

// Appends the session's fence token to the "log" array in storage: the order commits landed in.
template <class B>
asio::awaitable<void> append_token(sp::Session<B>& s, sp::Token token) {
  auto log = co_await s.read("log");
  sp::Value next = log ? *log : sp::Value::array();
  next.push_back(token);
  co_await s.write("log", next);
}

}  // namespace conformance

TEMPLATE_LIST_TEST_CASE("paused owners and takeovers on several threads: no stale commit lands",
                        "[conformance][concurrency][fence]", ConformanceFixtures) {
  // Every worker wins the lease `rounds` times and pauses past its ttl in exactly one of them;
  // the paused worker commits only once a newer token exists, so each pause is a stale attempt.
  constexpr int workers = 4, rounds = 4;
  std::mutex mu;
  std::vector<conformance::Acquired> acquired;
  std::vector<conformance::CommitAttempt> attempts;
  std::vector<sp::Token> landed, refused;
  std::vector<sp::Token> log;  // read back from storage
  sp::test::run(
      [&](asio::any_io_executor ex) -> asio::awaitable<void> {
        TestType fx(ex);
        using B = typename TestType::backend_type;
        using clock = std::chrono::steady_clock;
        sp::Manager<B> manager(fx.backend());
        sp::LeaseManager<B> leases(fx.backend(), 30s);
        const auto r = fx.resource("takeovers");
        co_await manager.register_resource(r, sp::Value::object());
        std::atomic<int> finished{0};
        auto record = [&](auto& list, auto item) {
          std::lock_guard g(mu);
          list.push_back(item);
        };
        auto worker = [&](int id) -> asio::awaitable<void> {
          const std::string owner = "worker-" + std::to_string(id);
          for (int i = 0; i < rounds; ++i) {
            const bool pause = (i + id) % rounds == 0;
            // Only a paused owner's lease may expire: the others hold theirs for long.
            const auto ttl = pause ? fx.short_ttl() : 30s;
            auto lease = co_await leases.acquire(r, owner, ttl, 60s);
            record(acquired, conformance::Acquired{lease.token, clock::now()});
            if (pause) {
              co_await fx.advance(fx.short_ttl() + 10ms);  // a pause past the ttl
              // Until another worker took over; when all others are done, take over explicitly.
              sp::Token fence = lease.token;
              while (fence == lease.token) {
                if (finished.load() == workers - 1) {
                  auto successor = co_await leases.acquire(r, owner + "-successor", 30s, 60s);
                  record(acquired, conformance::Acquired{successor.token, clock::now()});
                  co_await fx.backend().release_lease(successor);
                }
                co_await sp::test::sleep_for(2ms);
                fence = co_await fx.backend().current_fence(r);
              }
            }
            const auto invoked = clock::now();
            bool lost = false;
            try {
              auto append = [&](sp::Session<B>& s) {
                return conformance::append_token(s, lease.token);
              };
              co_await manager.run(
                  sp::SessionOptions(owner).resource(r).fence(lease.token), append,
                  sp::RetryPolicy().max_attempts(1000).initial_backoff(1ms).max_backoff(5ms));
            } catch (const sp::LeaseLostError&) {
              lost = true;
            }
            record(attempts, conformance::CommitAttempt{lease.token, invoked, !lost});
            record(lost ? refused : landed, lease.token);
            if (!pause) {  // (no Catch2 macro here: workers run on two threads)
              const bool released = co_await fx.backend().release_lease(lease);
              if (!released) throw std::runtime_error(owner + " could not release its lease");
            }
          }
          ++finished;
        };
        sp::test::Workers pool(ex);
        for (int id = 0; id < workers; ++id) pool.spawn(worker(id));
        co_await pool.join(120s, "lease workers");
        auto stored = co_await fx.backend().read(r, "log");
        REQUIRE(stored.value);
        for (const auto& t : *stored.value) log.push_back(t.template get<sp::Token>());
      },
      2);
  std::sort(landed.begin(), landed.end());
  std::sort(refused.begin(), refused.end());
  // Every pause was a stale attempt, and each was refused; every other commit landed.
  CHECK(refused.size() == static_cast<std::size_t>(workers));
  CHECK(landed.size() == static_cast<std::size_t>(workers * (rounds - 1)));
  // Storage's own record: exactly the commits that reported success, in strictly increasing
  // token order (one commit per token), and none of a refused token.
  auto in_storage = log;
  std::sort(in_storage.begin(), in_storage.end());
  CHECK(in_storage == landed);
  CHECK(std::is_sorted(log.begin(), log.end()));
  CHECK(std::adjacent_find(log.begin(), log.end()) == log.end());
  for (auto t : refused) CHECK(std::find(log.begin(), log.end(), t) == log.end());
  // In real time: a commit invoked after a newer token's acquisition returned never lands.
  for (const auto& c : attempts) {
    if (!c.landed) continue;
    for (const auto& a : acquired) {
      INFO("token " << c.token << " committed after token " << a.token << " was acquired");
      CHECK(!(a.token > c.token && a.done < c.invoked));
    }
  }
}
