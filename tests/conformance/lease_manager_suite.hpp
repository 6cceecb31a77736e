// LeaseManager on any backend: hold() on every exit path, renewal and its failure, waiting
// acquisition, and many coroutines on several threads contending for leases.
#pragma once

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
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
#include "fixture.hpp"

namespace sp = statepact;

TEMPLATE_LIST_TEST_CASE("hold releases the lease on normal exit and on exception",
                        "[conformance][hold]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    TestType fx(ex);
    sp::LeaseManager<typename TestType::backend_type> leases(fx.backend(), 30s);
    const auto r = fx.resource("hold-exits");
    sp::Token seen = 0;
    auto body = [&](const sp::Lease& l) -> asio::awaitable<int> {
      seen = l.token;
      co_return 42;
    };
    int v = co_await leases.hold(r, "worker-a", body);
    CHECK(v == 42);
    CHECK(seen == 1);
    auto next = co_await fx.backend().acquire_lease(r, "worker-b", 30s);  // released: free now
    CHECK(next.token == 2);
    auto awaited1 = co_await fx.backend().release_lease(next);
    CHECK(awaited1);

    auto failing = [](const sp::Lease&) -> asio::awaitable<void> {
      throw std::runtime_error("job failed");
      co_return;
    };
    auto err = co_await sp::test::thrown<std::runtime_error>(
        [&] { return leases.hold(r, "worker-a", failing); });
    REQUIRE(err);
    CHECK(std::string(err->what()) == "job failed");
    auto after = co_await fx.backend().acquire_lease(r, "worker-b", 30s);
    CHECK(after.token == 4);
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
      auto awaited_start = co_await sp::test::eventually([&] { return started.load(); });
      CHECK(awaited_start);
      stop.emit(asio::cancellation_type::terminal);
      auto awaited_end = co_await sp::test::eventually([&] { return finished; });
      CHECK(awaited_end);
      CHECK(hold_error != nullptr);  // the body was cancelled, and hold says so
      auto other = co_await fx.backend().acquire_lease(r, "worker-b", 30s);  // and released
      auto awaited2 = co_await fx.backend().release_lease(other);
      CHECK(awaited2);
    }
  });
}

TEMPLATE_LIST_TEST_CASE("auto_renew keeps the lease alive past its ttl", "[conformance][hold]",
                        ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    TestType fx(ex);
    const auto ttl = fx.short_ttl();
    sp::LeaseManager<typename TestType::backend_type> leases(fx.backend(), ttl);
    const auto r = fx.resource("hold-renew");
    bool renewed_each_time = true;
    bool refused = false;
    auto body = [&](sp::HeldLease& h) -> asio::awaitable<void> {
      for (int i = 0; i < 4; ++i) {
        const auto before = h.lease().expires_at;
        co_await fx.advance(ttl / 2);  // two of these would expire an unrenewed lease
        renewed_each_time &=
            co_await sp::test::eventually([&] { return h.lease().expires_at > before; });
      }
      try {
        co_await fx.backend().acquire_lease(r, "worker-b", ttl);
      } catch (const sp::LeaseNotAvailableError&) {
        refused = true;
      }
      CHECK(!h.lost());
    };
    co_await leases.hold(r, "worker-a", body,
                         sp::HoldOptions().auto_renew(true).renew_every(ttl / 10));
    CHECK(renewed_each_time);
    CHECK(refused);
  });
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
    auto lost = co_await sp::test::thrown<sp::LeaseLostError>([&] {
      return leases.hold(r, "worker-a", body,
                         sp::HoldOptions().auto_renew(true).renew_every(ttl / 10));
    });
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
      noticed = co_await sp::test::eventually([&] { return h.lost(); });
      CHECK_THROWS_AS(h.check(), sp::LeaseLostError);
    };
    auto awaited7 = co_await sp::test::thrown<sp::LeaseLostError>([&] {
      return leases.hold(
          r2, "worker-a", polling,
          sp::HoldOptions().auto_renew(true).renew_every(ttl / 10).cancel_on_loss(false));
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
        std::atomic<int> done{0};
        std::exception_ptr failure;
        std::mutex fmu;
        for (int id = 0; id < workers; ++id)
          asio::co_spawn(ex,
                         worker(manager, leases, r, id, holders, max_holders, commits, mu, tokens),
                         [&](std::exception_ptr e) {
                           if (e) {
                             std::lock_guard g(fmu);
                             failure = e;
                           }
                           ++done;
                         });
        co_await sp::test::eventually([&] { return done.load() == workers; }, 120s);
        if (failure) std::rethrow_exception(failure);
      },
      2);
  CHECK(max_holders.load() == 1);
  CHECK(commits.load() == workers * rounds);
  std::sort(tokens.begin(), tokens.end());
  REQUIRE(tokens.size() == static_cast<std::size_t>(workers * rounds));
  for (std::size_t i = 0; i < tokens.size(); ++i) CHECK(tokens[i] == i + 1);  // each once, no gaps
}

TEMPLATE_LIST_TEST_CASE("paused owners and takeovers on several threads: no stale commit lands",
                        "[conformance][concurrency][fence]", ConformanceFixtures) {
  constexpr int workers = 8, rounds = 10;
  std::mutex mu;
  std::vector<std::pair<sp::Version, sp::Token>> landed;
  std::atomic<int> fenced{0};
  sp::test::run(
      [&](asio::any_io_executor ex) -> asio::awaitable<void> {
        TestType fx(ex);
        using B = typename TestType::backend_type;
        sp::Manager<B> manager(fx.backend());
        const auto r = fx.resource("takeovers");
        co_await manager.register_resource(r, sp::Value::object());
        auto worker = [](TestType& f, sp::Manager<B>& m, std::string res, int id, std::mutex& mtx,
                         std::vector<std::pair<sp::Version, sp::Token>>& out,
                         std::atomic<int>& stale) -> asio::awaitable<void> {
          const std::string owner = "worker-" + std::to_string(id);
          for (int i = 0; i < rounds; ++i) {
            sp::Lease lease;
            bool busy = false;
            try {
              lease = co_await m.lease(res, owner, f.short_ttl());
            } catch (const sp::LeaseNotAvailableError&) {
              busy = true;
            }
            if (busy) {
              co_await sp::test::sleep_for(std::chrono::milliseconds(1 + id % 3));
              continue;
            }
            if ((i + id) % 3 == 0)
              co_await f.advance(f.short_ttl() + 10ms);  // a pause past the ttl
            try {
              auto s =
                  co_await m.session(sp::SessionOptions(owner).resource(res).fence(lease.token));
              co_await s.write("token", lease.token);
              auto result = co_await s.commit();
              std::lock_guard g(mtx);
              out.emplace_back(result.versions.at(res), lease.token);
            } catch (const sp::LeaseLostError&) {
              ++stale;
            }
            co_await m.backend().release_lease(lease);
          }
        };
        std::atomic<int> done{0};
        std::exception_ptr failure;
        std::mutex fmu;
        for (int id = 0; id < workers; ++id)
          asio::co_spawn(ex, worker(fx, manager, r, id, mu, landed, fenced),
                         [&](std::exception_ptr e) {
                           if (e) {
                             std::lock_guard g(fmu);
                             failure = e;
                           }
                           ++done;
                         });
        co_await sp::test::eventually([&] { return done.load() == workers; }, 120s);
        if (failure) std::rethrow_exception(failure);
        auto last = co_await fx.backend().read(r, "token");
        std::lock_guard g(mu);
        if (!landed.empty()) {
          auto top = *std::max_element(landed.begin(), landed.end());
          CHECK(last.version == top.first);
          CHECK(last.value == sp::Value(top.second));
        }
      },
      2);
  REQUIRE(!landed.empty());
  std::sort(landed.begin(), landed.end());
  for (std::size_t i = 1; i < landed.size(); ++i) {
    CHECK(landed[i].first == landed[i - 1].first + 1);  // versions: each commit exactly once
    CHECK(landed[i].second >= landed[i - 1].second);    // tokens never go back in storage
  }
}
