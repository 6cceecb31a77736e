// Sessions on any backend: buffered writes and atomic commits, each isolation mode's guarantees and
// the anomalies it allows, pessimistic locking, idempotent commits and run()'s retries.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/experimental/parallel_group.hpp>
#include <asio/post.hpp>

#include <catch2/catch.hpp>

#include "../support/expect.hpp"
#include "../support/run.hpp"
#include "../support/sleep.hpp"
#include "../support/workers.hpp"
#include "fixture.hpp"

namespace sp = statepact;

namespace conformance {

// Non-dependent accessors: on a dependent co_await result GCC wants `template` everywhere.
inline int as_int(const std::optional<sp::Value>& v) {
  return v.value().get<int>();
}
inline int entry_int(const sp::Entry& e) {
  return e.value.value().get<int>();
}

inline sp::SessionOptions opts(const std::string& agent, const std::string& resource,
                               sp::Isolation iso) {
  return sp::SessionOptions(agent).resource(resource).isolation(iso);
}

// Registers `name` with the state given as JSON text (no braced lists inside co_await: g++ 12).
template <class M>
asio::awaitable<std::string> make_resource(M& manager, std::string name, const char* state_json) {
  co_await manager.register_resource(name, sp::Value::parse(state_json));
  co_return name;
}

// Doubles that JSON text or a store may change: the sign of zero, integral values that print with
// an exponent (1e15 and up), the extremes and the smallest subnormal.
inline std::vector<double> awkward_doubles() {
  return {-0.0,
          0.0,
          1e15,
          -1e15,
          1e16,
          1.5e17,
          1152921504606846976.0 /* 2^60 */,
          -1e18,
          1.8446744073709552e19,
          1e300,
          -1.7976931348623157e308,
          5e-324,
          -5e-324,
          0.1};
}

// A double read back as a double with the same bits.
inline bool same_double(const std::optional<sp::Value>& v, double x) {
  return v && v->is_number_float() &&
         std::bit_cast<std::uint64_t>(v->get<double>()) == std::bit_cast<std::uint64_t>(x);
}

}  // namespace conformance

TEMPLATE_LIST_TEST_CASE("writes are buffered, read back, and applied only by commit",
                        "[conformance][session]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    TestType fx(ex);
    sp::Manager<B> m(fx.backend());
    const auto r = fx.resource("basics");
    co_await m.register_resource(r, sp::Value::object());
    {
      auto s = co_await m.session(sp::SessionOptions("a").resource(r));
      co_await s.write("status", "running");
      sp::Value doc = {{"n", 1}, {"tags", {"x", "y"}}};
      co_await s.write("doc", doc);
      auto awaited1 = co_await s.read("status");
      CHECK(awaited1 == sp::Value("running"));  // read your own writes
      auto awaited2 = co_await fx.backend().read(r, "status");
      CHECK(!(awaited2).value);  // nothing applied yet
      auto res = co_await s.commit();
      CHECK(res.versions.at(r) == 1);
      CHECK(!res.replayed);
      CHECK(!s.active());
      auto used_after = co_await sp::test::thrown<sp::UsageError>([&] { return s.read("status"); });
      CHECK(used_after);
      auto awaited3 = co_await sp::test::thrown<sp::UsageError>([&] { return s.commit(); });
      CHECK(awaited3);
    }
    auto awaited4 = co_await fx.backend().read(r, "doc");
    CHECK((awaited4).value == sp::Value({{"n", 1}, {"tags", {"x", "y"}}}));
    {
      auto s = co_await m.session(sp::SessionOptions("a").resource(r));
      co_await s.erase("status");
      auto awaited5 = co_await s.read("status");
      CHECK(!(awaited5));
      co_await s.commit();
    }
    auto erased = co_await fx.backend().read(r, "status");
    CHECK(!erased.value);
    CHECK(erased.version == 2);  // a tombstone remembers when
    {
      auto s = co_await m.session(sp::SessionOptions("a").resource(r));
      co_await s.write("doc", 5);
      co_await s.abort();
      auto awaited6 = co_await sp::test::thrown<sp::UsageError>([&] { return s.write("doc", 6); });
      CHECK(awaited6);
    }
    {
      auto s = co_await m.session(sp::SessionOptions("a").resource(r));
      co_await s.write("doc", 7);
    }  // dropped without commit: aborted
    auto awaited7 = co_await fx.backend().read(r, "doc");
    CHECK((awaited7).version == 1);
    // Keys outside the session's resources, and single-resource shortcuts on many resources.
    const auto r2 = fx.resource("basics-2");
    co_await m.register_resource(r2, sp::Value::object());
    auto multi = co_await m.session(sp::SessionOptions("a").resource(r).resource(r2));
    auto needs_resource =
        co_await sp::test::thrown<sp::InvalidArgumentError>([&] { return multi.read("doc"); });
    CHECK(needs_resource);
    auto awaited8 = co_await sp::test::thrown<sp::InvalidArgumentError>(
        [&] { return multi.write(fx.resource("elsewhere"), "k", 1); });
    CHECK(awaited8);
    auto awaited9 = co_await sp::test::thrown<sp::InvalidArgumentError>(
        [&] { return m.session(sp::SessionOptions("a").resource(r).resource(r2).fence(1)); });
    CHECK(awaited9);
  });
}

TEMPLATE_LIST_TEST_CASE("doubles come back as the same doubles, the sign of zero included",
                        "[conformance][session]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    TestType fx(ex);
    sp::Manager<B> m(fx.backend());
    const auto xs = conformance::awkward_doubles();
    const auto r = fx.resource("doubles");
    // Every way a value reaches storage: the initial state, a commit of one write, a commit of
    // several, an idempotent commit; and values nested in arrays and objects.
    sp::Value state = sp::Value::object();
    for (std::size_t i = 0; i < xs.size(); ++i) state["init" + std::to_string(i)] = xs[i];
    co_await m.register_resource(r, state);
    for (std::size_t i = 0; i < xs.size(); ++i) {
      auto s = co_await m.session(sp::SessionOptions("a").resource(r));
      co_await s.write("one" + std::to_string(i), xs[i]);
      co_await s.commit();
    }
    {
      auto s = co_await m.session(sp::SessionOptions("a").resource(r));
      for (std::size_t i = 0; i < xs.size(); ++i)
        co_await s.write("many" + std::to_string(i), xs[i]);
      co_await s.commit();
    }
    sp::Value list = sp::Value::array(), doc = sp::Value::object();
    for (std::size_t i = 0; i < xs.size(); ++i) {
      list.push_back(xs[i]);
      doc["d" + std::to_string(i)] = xs[i];
    }
    {
      auto s = co_await m.session(
          sp::SessionOptions("a").resource(r).idempotency_key(fx.resource("doubles-key")));
      co_await s.write("list", list);
      co_await s.write("doc", doc);
      co_await s.commit();
    }
    const std::vector<std::string> paths{"init", "one", "many"};
    for (std::size_t i = 0; i < xs.size(); ++i) {
      INFO("double " << xs[i] << " (" << i << ")");
      for (const std::string& path : paths) {
        INFO("written by " << path);
        auto e = co_await fx.backend().read(r, path + std::to_string(i));
        CHECK(conformance::same_double(e.value, xs[i]));
      }
    }
    // Read through a snapshot too (one call for every key of the resource).
    auto s =
        co_await m.session(sp::SessionOptions("a").resource(r).isolation(sp::Isolation::snapshot));
    auto got_list = co_await s.read("list");
    auto got_doc = co_await s.read("doc");
    REQUIRE(got_list);
    REQUIRE(got_list->is_array());
    REQUIRE(got_list->size() == xs.size());
    REQUIRE(got_doc);
    for (std::size_t i = 0; i < xs.size(); ++i) {
      INFO("double " << xs[i] << " (" << i << ")");
      CHECK(conformance::same_double((*got_list)[i], xs[i]));
      CHECK(conformance::same_double(got_doc->value("d" + std::to_string(i), sp::Value()), xs[i]));
    }
  });
}

TEMPLATE_LIST_TEST_CASE("a commit over several resources applies all or nothing",
                        "[conformance][session]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    TestType fx(ex);
    sp::Manager<B> m(fx.backend());
    const auto from =
        co_await conformance::make_resource(m, fx.resource("acct-a"), R"({"balance": 100})");
    const auto to =
        co_await conformance::make_resource(m, fx.resource("acct-b"), R"({"balance": 0})");
    auto transfer = sp::SessionOptions("bank").resource(from).resource(to);
    {
      auto s = co_await m.session(transfer);
      auto a = conformance::as_int(co_await s.read(from, "balance"));
      auto b = conformance::as_int(co_await s.read(to, "balance"));
      co_await s.write(from, "balance", a - 30);
      co_await s.write(to, "balance", b + 30);
      auto res = co_await s.commit();
      CHECK(res.versions.at(from) == 1);
      CHECK(res.versions.at(to) == 1);
    }
    {
      auto s = co_await m.session(transfer);
      auto a = conformance::as_int(co_await s.read(from, "balance"));
      auto b = conformance::as_int(co_await s.read(to, "balance"));
      {  // someone else touches the second account in between
        auto other = co_await m.session(sp::SessionOptions("other").resource(to));
        co_await other.write("balance", 1000);
        co_await other.commit();
      }
      co_await s.write(from, "balance", a - 30);
      co_await s.write(to, "balance", b + 30);
      auto conflict = co_await sp::test::thrown<sp::ConflictError>([&] { return s.commit(); });
      REQUIRE(conflict);
      CHECK(conflict->resource() == to);
      CHECK(conflict->key() == "balance");
      CHECK(conflict->expected_version() == 1);
      CHECK(conflict->found_version() == 2);
      CHECK(conflict->retryable());
    }
    auto awaited10 = co_await fx.backend().read(from, "balance");
    CHECK((awaited10).value == sp::Value(70));  // untouched
    auto awaited11 = co_await fx.backend().read(from, "balance");
    CHECK((awaited11).version == 1);
  });
}

TEMPLATE_LIST_TEST_CASE("isolation none loses updates, every other mode prevents it",
                        "[conformance][isolation]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    TestType fx(ex);
    sp::Manager<B> m(fx.backend());
    for (auto iso : {sp::Isolation::none, sp::Isolation::optimistic, sp::Isolation::snapshot,
                     sp::Isolation::serializable}) {
      const auto r = co_await conformance::make_resource(
          m, fx.resource(std::string("counter-") + sp::to_string(iso)), R"({"n": 0})");
      auto s1 = co_await m.session(conformance::opts("a", r, iso));
      auto s2 = co_await m.session(conformance::opts("b", r, iso));
      auto n1 = conformance::as_int(co_await s1.read("n"));
      auto n2 = conformance::as_int(co_await s2.read("n"));
      co_await s1.write("n", n1 + 1);
      co_await s2.write("n", n2 + 1);
      co_await s1.commit();
      auto conflict = co_await sp::test::thrown<sp::ConflictError>([&] { return s2.commit(); });
      auto n = conformance::entry_int(co_await fx.backend().read(r, "n"));
      if (iso == sp::Isolation::none) {
        CHECK(!conflict);
        CHECK(n == 1);  // two increments, one survived: the lost update
      } else {
        CHECK(conflict);
        CHECK(n == 1);  // and the loser knows it must retry
      }
    }
  });
}

TEMPLATE_LIST_TEST_CASE("optimistic validates reads, reads-as-absent, and catches torn reads",
                        "[conformance][isolation]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    TestType fx(ex);
    sp::Manager<B> m(fx.backend());
    const auto r =
        co_await conformance::make_resource(m, fx.resource("opt"), R"({"a": 1, "b": 1})");
    auto bump_both = [&]() -> asio::awaitable<void> {
      auto s = co_await m.session(conformance::opts("writer", r, sp::Isolation::optimistic));
      co_await s.write("a", 2);
      co_await s.write("b", 2);
      co_await s.write("flag", true);
      co_await s.commit();
    };
    {  // read-as-absent: "flag" appears after we saw it missing
      auto s = co_await m.session(conformance::opts("reader", r, sp::Isolation::optimistic));
      auto awaited12 = co_await s.read("flag");
      CHECK(!(awaited12));
      co_await bump_both();
      co_await s.write("other", 1);
      auto c = co_await sp::test::thrown<sp::ConflictError>([&] { return s.commit(); });
      REQUIRE(c);
      CHECK(c->key() == "flag");
      CHECK(c->expected_version() == 0);
    }
    {  // torn read: a before, b after another commit; commit refuses the inconsistent view
      auto s = co_await m.session(conformance::opts("reader", r, sp::Isolation::optimistic));
      auto a = conformance::as_int(co_await s.read("a"));
      {
        auto w = co_await m.session(conformance::opts("writer", r, sp::Isolation::optimistic));
        co_await w.write("a", 3);
        co_await w.write("b", 3);
        co_await w.commit();
      }
      auto b = conformance::as_int(co_await s.read("b"));
      CHECK(a != b);  // optimistic reads may be torn...
      co_await s.write("sum", a + b);
      auto awaited13 = co_await sp::test::thrown<sp::ConflictError>([&] { return s.commit(); });
      CHECK(awaited13);  // ...but never commit
    }
    {  // a read-only optimistic session validates too
      auto s = co_await m.session(conformance::opts("reader", r, sp::Isolation::optimistic));
      co_await s.read("a");
      co_await bump_both();
      auto awaited14 = co_await sp::test::thrown<sp::ConflictError>([&] { return s.commit(); });
      CHECK(awaited14);
    }
  });
}

TEMPLATE_LIST_TEST_CASE("snapshot reads are consistent across resources, and write skew is allowed",
                        "[conformance][isolation]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    TestType fx(ex);
    sp::Manager<B> m(fx.backend());
    const auto ra = co_await conformance::make_resource(m, fx.resource("snap-a"), R"({"x": 1})");
    const auto rb = co_await conformance::make_resource(m, fx.resource("snap-b"), R"({"y": 1})");
    {
      auto s = co_await m.session(
          sp::SessionOptions("r").resource(ra).resource(rb).isolation(sp::Isolation::snapshot));
      auto x = conformance::as_int(co_await s.read(ra, "x"));
      {
        auto w = co_await m.session(sp::SessionOptions("w").resource(ra).resource(rb));
        co_await w.write(ra, "x", 2);
        co_await w.write(rb, "y", 2);
        co_await w.commit();
      }
      auto y = conformance::as_int(co_await s.read(rb, "y"));
      CHECK(x == 1);
      CHECK(y == 1);        // the same snapshot: never x from before and y from after
      co_await s.commit();  // read-only: nothing to validate
    }
    for (auto iso : {sp::Isolation::snapshot, sp::Isolation::serializable}) {
      // Doctors on call: each may go off call only if the other stays on.
      const auto r = co_await conformance::make_resource(
          m, fx.resource(std::string("oncall-") + sp::to_string(iso)), R"({"alice": 1, "bob": 1})");
      auto alice = co_await m.session(conformance::opts("alice", r, iso));
      auto bob = co_await m.session(conformance::opts("bob", r, iso));
      auto on_a = conformance::as_int(co_await alice.read("alice")) +
                  conformance::as_int(co_await alice.read("bob"));
      auto on_b = conformance::as_int(co_await bob.read("alice")) +
                  conformance::as_int(co_await bob.read("bob"));
      CHECK(on_a == 2);
      CHECK(on_b == 2);
      co_await alice.write("alice", 0);
      co_await bob.write("bob", 0);
      co_await alice.commit();
      auto refused = co_await sp::test::thrown<sp::ConflictError>([&] { return bob.commit(); });
      auto left = conformance::entry_int(co_await fx.backend().read(r, "alice")) +
                  conformance::entry_int(co_await fx.backend().read(r, "bob"));
      if (iso == sp::Isolation::snapshot) {
        CHECK(!refused);
        CHECK(left == 0);  // write skew: nobody on call
      } else {
        CHECK(refused);
        CHECK(left == 1);
      }
    }
    {  // snapshot: first committer wins on a key both wrote blindly
      const auto r = co_await conformance::make_resource(m, fx.resource("fcw"), R"({"k": 0})");
      auto s1 = co_await m.session(conformance::opts("a", r, sp::Isolation::snapshot));
      auto s2 = co_await m.session(conformance::opts("b", r, sp::Isolation::snapshot));
      co_await s1.write("k", 1);
      co_await s2.write("k", 2);
      co_await s1.commit();
      auto awaited15 = co_await sp::test::thrown<sp::ConflictError>([&] { return s2.commit(); });
      CHECK(awaited15);
      auto awaited16 = co_await fx.backend().read(r, "k");
      CHECK((awaited16).value == sp::Value(1));
    }
    {  // serializable: a key read as absent that then appears
      const auto r = co_await conformance::make_resource(m, fx.resource("ser-absent"), R"({})");
      auto s = co_await m.session(conformance::opts("a", r, sp::Isolation::serializable));
      auto awaited17 = co_await s.read("slot");
      CHECK(!(awaited17));
      {
        auto w = co_await m.session(conformance::opts("b", r, sp::Isolation::serializable));
        co_await w.write("slot", "taken");
        co_await w.commit();
      }
      auto awaited18 = co_await s.read("slot");
      CHECK(!(awaited18));  // still the snapshot
      co_await s.write("mine", 1);
      auto awaited19 = co_await sp::test::thrown<sp::ConflictError>([&] { return s.commit(); });
      CHECK(awaited19);
    }
  });
}

TEMPLATE_LIST_TEST_CASE("write skew is prevented under optimistic and pessimistic",
                        "[conformance][isolation]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    TestType fx(ex);
    sp::Manager<B> m(fx.backend());
    {  // optimistic: bob's read of "alice" changed under him, so his commit is refused
      const auto r = co_await conformance::make_resource(m, fx.resource("oncall-optimistic"),
                                                         R"({"alice": 1, "bob": 1})");
      auto alice = co_await m.session(conformance::opts("alice", r, sp::Isolation::optimistic));
      auto bob = co_await m.session(conformance::opts("bob", r, sp::Isolation::optimistic));
      auto on_a = conformance::as_int(co_await alice.read("alice")) +
                  conformance::as_int(co_await alice.read("bob"));
      auto on_b = conformance::as_int(co_await bob.read("alice")) +
                  conformance::as_int(co_await bob.read("bob"));
      CHECK(on_a == 2);
      CHECK(on_b == 2);
      co_await alice.write("alice", 0);
      co_await bob.write("bob", 0);
      co_await alice.commit();
      auto refused = co_await sp::test::thrown<sp::ConflictError>([&] { return bob.commit(); });
      REQUIRE(refused);
      CHECK(refused->key() == "alice");
      auto left = conformance::entry_int(co_await fx.backend().read(r, "alice")) +
                  conformance::entry_int(co_await fx.backend().read(r, "bob"));
      CHECK(left == 1);
    }
    {  // pessimistic: both hold shared locks on what they read, so the two writes wait on each
       // other; one is refused as a deadlock and the other commits.
      const auto r = co_await conformance::make_resource(m, fx.resource("oncall-pessimistic"),
                                                         R"({"alice": 1, "bob": 1})");
      std::atomic<int> committed{0}, refused{0}, have_read{0};
      auto doctor = [&](std::string me) -> asio::awaitable<void> {
        auto s = co_await m.session(
            conformance::opts(me, r, sp::Isolation::pessimistic).lock_timeout(5000ms));
        const int on = conformance::as_int(co_await s.read("alice")) +
                       conformance::as_int(co_await s.read("bob"));
        // Both have read (and hold shared locks) before either writes.
        ++have_read;
        co_await sp::test::eventually([&] { return have_read.load() == 2; }, 10s,
                                      "both doctors to read");
        if (on < 2) co_return;  // the rule: the other must stay on call
        bool deadlock = false;
        try {
          co_await s.write(me, 0);
        } catch (const sp::DeadlockError&) {
          deadlock = true;
        }
        if (deadlock) {
          ++refused;
          co_await s.abort();
          co_return;
        }
        co_await s.commit();
        ++committed;
      };
      auto [order, e1, e2] =
          co_await asio::experimental::make_parallel_group(
              asio::co_spawn(ex, doctor("alice"), asio::experimental::deferred),
              asio::co_spawn(ex, doctor("bob"), asio::experimental::deferred))
              .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
      CHECK(e1 == nullptr);
      CHECK(e2 == nullptr);
      CHECK(committed.load() == 1);
      CHECK(refused.load() == 1);
      auto left = conformance::entry_int(co_await fx.backend().read(r, "alice")) +
                  conformance::entry_int(co_await fx.backend().read(r, "bob"));
      CHECK(left == 1);
    }
  });
}

TEMPLATE_LIST_TEST_CASE(
    "a key read as absent that then appears: none misses it, snapshot only when written, "
    "pessimistic locks it",
    "[conformance][isolation]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    TestType fx(ex);
    sp::Manager<B> m(fx.backend());
    auto appear = [&](std::string r) -> asio::awaitable<void> {
      auto w = co_await m.session(conformance::opts("writer", r, sp::Isolation::optimistic));
      co_await w.write("slot", "taken");
      co_await w.commit();
    };
    {  // none: undetected, the commit lands
      const auto r = co_await conformance::make_resource(m, fx.resource("absent-none"), "{}");
      auto s = co_await m.session(conformance::opts("a", r, sp::Isolation::none));
      auto seen = co_await s.read("slot");
      CHECK(!seen);
      co_await appear(r);
      co_await s.write("mine", 1);
      auto c = co_await sp::test::thrown<sp::ConflictError>([&] { return s.commit(); });
      CHECK(!c);
      auto mine = co_await fx.backend().read(r, "mine");
      CHECK(mine.value == sp::Value(1));
    }
    for (bool writes_it : {false, true}) {  // snapshot: undetected unless the session writes it
      INFO("snapshot session writes the key: " << writes_it);
      const auto r = co_await conformance::make_resource(
          m, fx.resource(writes_it ? "absent-snap-w" : "absent-snap"), "{}");
      auto s = co_await m.session(conformance::opts("a", r, sp::Isolation::snapshot));
      auto seen = co_await s.read("slot");
      CHECK(!seen);
      co_await appear(r);
      auto still = co_await s.read("slot");
      CHECK(!still);  // the snapshot
      co_await s.write(writes_it ? "slot" : "mine", "a's");
      auto c = co_await sp::test::thrown<sp::ConflictError>([&] { return s.commit(); });
      CHECK(static_cast<bool>(c) == writes_it);
      auto slot = co_await fx.backend().read(r, "slot");
      CHECK(slot.value == sp::Value("taken"));
    }
    {  // pessimistic: the absent key is locked, so it cannot appear until the reader ends
      const auto r = co_await conformance::make_resource(m, fx.resource("absent-pess"), "{}");
      auto s = co_await m.session(conformance::opts("a", r, sp::Isolation::pessimistic));
      auto seen = co_await s.read("slot");
      CHECK(!seen);
      auto w = co_await m.session(
          conformance::opts("writer", r, sp::Isolation::pessimistic).lock_timeout(150ms));
      auto blocked =
          co_await sp::test::thrown<sp::LockTimeoutError>([&] { return w.write("slot", "taken"); });
      CHECK(blocked);
      co_await w.abort();
      auto again = co_await s.read("slot");
      CHECK(!again);
      co_await s.write("mine", 1);
      co_await s.commit();
      auto w2 = co_await m.session(
          conformance::opts("writer", r, sp::Isolation::pessimistic).lock_timeout(5000ms));
      co_await w2.write("slot", "taken");
      co_await w2.commit();
      auto slot = co_await fx.backend().read(r, "slot");
      CHECK(slot.value == sp::Value("taken"));
    }
  });
}

TEMPLATE_LIST_TEST_CASE(
    "pessimistic sessions lock: writers wait, time out, and deadlocks are caught",
    "[conformance][isolation][pessimistic]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    TestType fx(ex);
    sp::Manager<B> m(fx.backend());
    const auto r =
        co_await conformance::make_resource(m, fx.resource("pess"), R"({"x": 0, "y": 0})");
    auto popts = [&](const char* who) {
      return conformance::opts(who, r, sp::Isolation::pessimistic).lock_timeout(5000ms);
    };
    {  // a second writer waits for the first, then sees its value
      using clock = std::chrono::steady_clock;
      auto s1 = co_await m.session(popts("a"));
      auto x = conformance::as_int(co_await s1.read_for_update("x"));  // s1 holds x from here
      std::atomic<bool> second_asked{false};
      clock::time_point second_got{}, first_commits{};
      auto second = [&]() -> asio::awaitable<int> {
        auto s2 = co_await m.session(popts("b"));
        second_asked = true;
        auto v = conformance::as_int(co_await s2.read_for_update("x"));
        second_got = clock::now();
        co_await s2.write("x", v + 1);
        co_await s2.commit();
        co_return v;
      };
      auto first = [&]() -> asio::awaitable<void> {
        // The second session exists and has asked for x; give its request time to arrive, then
        // commit. A lock that does not hold would be granted in that time.
        co_await sp::test::eventually([&] { return second_asked.load(); }, 10s,
                                      "the second session to ask for x");
        co_await sp::test::sleep_for(100ms);
        co_await s1.write("x", x + 1);
        first_commits = clock::now();
        co_await s1.commit();
      };
      auto [order, e1, seen_by_second, e2] =
          co_await asio::experimental::make_parallel_group(
              asio::co_spawn(ex, second(), asio::experimental::deferred),
              asio::co_spawn(ex, first(), asio::experimental::deferred))
              .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
      CHECK(e1 == nullptr);
      CHECK(e2 == nullptr);
      CHECK(second_got >= first_commits);  // granted only once the holder committed
      CHECK(seen_by_second == 1);          // and it read the first's value
      auto awaited20 = co_await fx.backend().read(r, "x");
      CHECK((awaited20).value == sp::Value(2));
    }
    {  // readers share; a writer times out behind a reader, after its timeout and not much more
      auto s1 = co_await m.session(popts("a"));
      auto s2 = co_await m.session(popts("b"));
      co_await s1.read("x");
      co_await s2.read("x");
      auto s3 = co_await m.session(popts("c").lock_timeout(200ms));
      const auto t0 = std::chrono::steady_clock::now();
      auto t = co_await sp::test::thrown<sp::LockTimeoutError>([&] { return s3.write("x", 9); });
      const auto waited = std::chrono::steady_clock::now() - t0;
      REQUIRE(t);
      CHECK(t->retryable());
      CHECK(waited >= 200ms);
      CHECK(waited < 3000ms);
      co_await s1.commit();
      co_await s2.abort();
    }
    {  // a wait cycle is a deadlock, detected rather than waited out (lock_timeout is 5 s)
      auto s1 = co_await m.session(popts("a"));
      auto s2 = co_await m.session(popts("b"));
      co_await s1.write("x", 10);
      co_await s2.write("y", 20);
      // Both requests wait on each other; whichever closes the cycle is refused, and once its
      // session aborts the other gets its lock. No sleep decides the order.
      std::atomic<int> deadlocks{0}, granted{0};
      auto request = [&](sp::Session<B>& s, std::string key, int v) -> asio::awaitable<void> {
        bool refused = false;
        try {
          co_await s.write(key, v);
        } catch (const sp::DeadlockError& d) {
          refused = d.retryable();
          if (!refused) throw;
        }
        if (refused) {
          ++deadlocks;
          co_await s.abort();
        } else {
          ++granted;
        }
      };
      const auto t0 = std::chrono::steady_clock::now();
      auto [order, e1, e2] =
          co_await asio::experimental::make_parallel_group(
              asio::co_spawn(ex, request(s1, "y", 11), asio::experimental::deferred),
              asio::co_spawn(ex, request(s2, "x", 21), asio::experimental::deferred))
              .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
      CHECK(e1 == nullptr);
      CHECK(e2 == nullptr);
      CHECK(deadlocks.load() == 1);
      CHECK(granted.load() == 1);
      CHECK(std::chrono::steady_clock::now() - t0 < 4000ms);
      if (s1.active()) co_await s1.abort();
      if (s2.active()) co_await s2.abort();
    }
    {  // a dropped session releases its locks
      {
        auto s1 = co_await m.session(popts("a"));
        co_await s1.write("x", 99);
      }
      auto s2 = co_await m.session(popts("b").lock_timeout(200ms));
      co_await s2.write("x", 3);
      co_await s2.commit();
      auto awaited21 = co_await fx.backend().read(r, "x");
      CHECK((awaited21).value == sp::Value(3));
    }
  });
}

TEMPLATE_LIST_TEST_CASE("idempotent commits replay their result and apply nothing",
                        "[conformance][idempotency]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    TestType fx(ex, 2000ms);
    sp::Manager<B> m(fx.backend());
    const auto r = co_await conformance::make_resource(m, fx.resource("idem"), R"({"stock": 10})");
    const auto key = fx.resource("order-1");
    auto reserve = [&](int to) -> asio::awaitable<sp::CommitResult> {
      auto s = co_await m.session(sp::SessionOptions("shop").resource(r).idempotency_key(key));
      co_await s.write("stock", to);
      co_return co_await s.commit();
    };
    auto first = co_await reserve(9);
    CHECK(!first.replayed);
    {  // state moves on
      auto s = co_await m.session(sp::SessionOptions("other").resource(r));
      co_await s.write("stock", 5);
      co_await s.commit();
    }
    auto replay = co_await reserve(9);
    CHECK(replay.replayed);
    CHECK(replay.versions == first.versions);
    auto awaited22 = co_await fx.backend().read(r, "stock");
    CHECK((awaited22).value == sp::Value(5));  // nothing re-applied
    auto awaited23 =
        co_await sp::test::thrown<sp::IdempotencyKeyReusedError>([&] { return reserve(8); });
    CHECK(awaited23);
    auto awaited24 = co_await fx.backend().read(r, "stock");
    CHECK((awaited24).value == sp::Value(5));
    // After the retention the record is purged and the key is free again.
    co_await fx.advance(2500ms);
    auto fresh = co_await reserve(8);
    CHECK(!fresh.replayed);
    auto awaited25 = co_await fx.backend().read(r, "stock");
    CHECK((awaited25).value == sp::Value(8));
  });
}

TEMPLATE_LIST_TEST_CASE(
    "an expired idempotency record frees its key while others still wait to be purged",
    "[conformance][idempotency]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    TestType fx(ex, 1000ms);
    sp::Manager<B> m(fx.backend());
    const auto r = co_await conformance::make_resource(m, fx.resource("backlog"), R"({"n": 0})");
    // More records than a commit purges at once (4 on memory, 100 on PostgreSQL), so the newest
    // is still stored, expired, when its key comes back.
    constexpr int records = 150;
    const std::string key = fx.resource("backlog-key-");
    for (int i = 0; i < records; ++i) {
      auto s = co_await m.session(
          sp::SessionOptions("filler").resource(r).idempotency_key(key + std::to_string(i)));
      co_await s.write("n", i);
      co_await s.commit();
    }
    co_await fx.advance(1500ms);
    auto s = co_await m.session(
        sp::SessionOptions("late").resource(r).idempotency_key(key + std::to_string(records - 1)));
    co_await s.write("n", -1);  // a different request: an unexpired record would refuse it
    auto result = co_await s.commit();
    CHECK_FALSE(result.replayed);
    auto after = co_await fx.backend().read(r, "n");
    CHECK(after.value == sp::Value(-1));
  });
}

TEMPLATE_LIST_TEST_CASE("run re-runs the whole transaction on conflicts, and only then",
                        "[conformance][retry]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    TestType fx(ex);
    sp::Manager<B> m(fx.backend());
    const auto r = co_await conformance::make_resource(m, fx.resource("run"), R"({"n": 0})");
    auto interfere = [&]() -> asio::awaitable<void> {
      auto o = co_await m.session(sp::SessionOptions("intruder").resource(r));
      auto n = conformance::as_int(co_await o.read("n"));
      co_await o.write("n", n + 100);
      co_await o.commit();
    };
    int calls = 0;
    auto increment = [&](sp::Session<B>& s) -> asio::awaitable<int> {
      ++calls;
      auto n = conformance::as_int(co_await s.read("n"));
      if (calls == 1) co_await interfere();  // the first attempt loses
      co_await s.write("n", n + 1);
      co_return n + 1;
    };
    auto quick = sp::RetryPolicy().initial_backoff(1ms).max_backoff(5ms);
    int v = co_await m.run(sp::SessionOptions("agent").resource(r), increment, quick);
    CHECK(calls == 2);
    CHECK(v == 101);
    auto awaited26 = co_await fx.backend().read(r, "n");
    CHECK((awaited26).value == sp::Value(101));

    calls = 0;
    auto always_loses = [&](sp::Session<B>& s) -> asio::awaitable<void> {
      ++calls;
      auto n = conformance::as_int(co_await s.read("n"));
      co_await interfere();
      co_await s.write("n", n + 1);
    };
    auto exhausted = co_await sp::test::thrown<sp::ConflictError>([&] {
      return m.run(sp::SessionOptions("agent").resource(r), always_loses,
                   sp::RetryPolicy().max_attempts(3).initial_backoff(1ms));
    });
    CHECK(exhausted);
    CHECK(calls == 3);

    calls = 0;
    auto lease = co_await m.lease(r, "worker-a", fx.short_ttl());
    co_await fx.advance(fx.short_ttl() + 50ms);
    co_await m.lease(r, "worker-b", 30s);
    auto fenced = [&](sp::Session<B>& s) -> asio::awaitable<void> {
      ++calls;
      co_await s.write("n", -1);
    };
    auto awaited27 = co_await sp::test::thrown<sp::LeaseLostError>([&] {
      return m.run(sp::SessionOptions("worker-a").resource(r).fence(lease.token), fenced, quick);
    });
    CHECK(awaited27);
    CHECK(calls == 1);  // never retried

    calls = 0;
    auto user_error = [&](sp::Session<B>&) -> asio::awaitable<void> {
      ++calls;
      throw std::runtime_error("bug");
      co_return;
    };
    auto awaited28 = co_await sp::test::thrown<std::runtime_error>(
        [&] { return m.run(sp::SessionOptions("agent").resource(r), user_error, quick); });
    CHECK(awaited28);
    CHECK(calls == 1);
  });
}

namespace conformance {

// One committed increment: the values it read, per key.
struct Increment {
  std::vector<std::pair<std::string, int>> reads;
};

// Each key's committed increments form a chain by the value read; the history is serializable iff
// no two committed increments read the same value of a key and the union of the chains is acyclic.
inline bool serializable_history(const std::vector<Increment>& h, std::string& why) {
  std::map<std::pair<std::string, int>, std::size_t> reader;  // (key, value read) -> txn
  for (std::size_t i = 0; i < h.size(); ++i)
    for (const auto& kv : h[i].reads)
      if (!reader.emplace(kv, i).second) {
        why = "two commits read " + kv.first + "=" + std::to_string(kv.second) + ": a lost update";
        return false;
      }
  std::vector<std::vector<std::size_t>> next(h.size());
  std::vector<int> indegree(h.size(), 0);
  for (std::size_t i = 0; i < h.size(); ++i)
    for (const auto& [k, v] : h[i].reads)
      if (auto it = reader.find({k, v + 1}); it != reader.end()) {
        next[i].push_back(it->second);
        ++indegree[it->second];
      }
  std::vector<std::size_t> ready;
  for (std::size_t i = 0; i < h.size(); ++i)
    if (indegree[i] == 0) ready.push_back(i);
  std::size_t ordered = 0;
  while (!ready.empty()) {
    auto i = ready.back();
    ready.pop_back();
    ++ordered;
    for (auto j : next[i])
      if (--indegree[j] == 0) ready.push_back(j);
  }
  if (ordered != h.size()) {
    why = "the committed history has a cycle";
    return false;
  }
  return true;
}

}  // namespace conformance

TEMPLATE_LIST_TEST_CASE("random concurrent increments under every safe mode lose nothing",
                        "[conformance][concurrency][isolation]", ConformanceFixtures) {
  constexpr int agents = 6, increments = 20;
  for (auto iso : {sp::Isolation::optimistic, sp::Isolation::snapshot, sp::Isolation::serializable,
                   sp::Isolation::pessimistic}) {
    DYNAMIC_SECTION("isolation " << sp::to_string(iso)) {
      std::mutex mu;
      std::vector<conformance::Increment> history;
      std::map<std::string, int> totals;
      sp::test::run(
          [&](asio::any_io_executor ex) -> asio::awaitable<void> {
            using B = typename TestType::backend_type;
            TestType fx(ex);
            sp::Manager<B> m(fx.backend());
            const auto r = co_await conformance::make_resource(
                m, fx.resource(std::string("incr-") + sp::to_string(iso)),
                R"({"k0": 0, "k1": 0, "k2": 0})");
            auto agent = [](sp::Manager<B>& mgr, std::string res, sp::Isolation mode, int id,
                            std::mutex& mtx,
                            std::vector<conformance::Increment>& out) -> asio::awaitable<void> {
              std::mt19937 rng(id * 7919 + 1);
              for (int i = 0; i < increments; ++i) {
                int a = static_cast<int>(rng() % 3), b = static_cast<int>(rng() % 3);
                std::vector<std::string> keys{"k" + std::to_string(a)};
                if (b != a) keys.push_back("k" + std::to_string(b));
                auto body = [&keys](sp::Session<B>& s) -> asio::awaitable<conformance::Increment> {
                  conformance::Increment inc;
                  for (const auto& k : keys) {
                    auto v = conformance::as_int(co_await s.read_for_update(k));
                    inc.reads.emplace_back(k, v);
                    // Let the other agents run between the read and the commit: without it a
                    // memory transaction never interleaves, and a mode that validated nothing
                    // would pass.
                    co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
                    co_await s.write(k, v + 1);
                  }
                  co_return inc;
                };
                auto inc = co_await mgr.run(
                    sp::SessionOptions("agent-" + std::to_string(id)).resource(res).isolation(mode),
                    body,
                    sp::RetryPolicy().max_attempts(10000).initial_backoff(0ms).max_backoff(2ms));
                std::lock_guard g(mtx);
                out.push_back(std::move(inc));
              }
            };
            sp::test::Workers pool(ex);
            for (int id = 0; id < agents; ++id) pool.spawn(agent(m, r, iso, id, mu, history));
            co_await pool.join(120s, "incrementing agents");
            for (const char* k : {"k0", "k1", "k2"})
              totals[k] = conformance::entry_int(co_await fx.backend().read(r, k));
          },
          2);
      int expected = 0;
      for (const auto& h : history) expected += static_cast<int>(h.reads.size());
      CHECK(history.size() == static_cast<std::size_t>(agents * increments));
      CHECK(totals["k0"] + totals["k1"] + totals["k2"] == expected);
      std::string why;
      CHECK(conformance::serializable_history(history, why));
      INFO(why);
    }
  }
}
