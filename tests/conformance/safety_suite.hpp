// Safety rules on any backend: an unknown commit outcome is resolved, never redone; renewal
// survives transient failures and never hides one; bad input is refused identically and changes
// nothing; fence-required resources refuse unfenced writes inside the commit.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "../support/expect.hpp"
#include "../support/faulty_backend.hpp"
#include "../support/run.hpp"
#include "../support/sleep.hpp"
#include "fixture.hpp"

namespace sp = statepact;

namespace safety {

inline int as_int(const std::optional<sp::Value>& v) {
  return v.value().get<int>();
}

// Registers `name` with the state given as JSON text (no braced lists inside co_await: g++ 12).
template <class M>
asio::awaitable<std::string> make_resource(M& manager, std::string name, const char* state_json,
                                           sp::ResourcePolicy policy = {}) {
  co_await manager.register_resource(name, sp::Value::parse(state_json), policy);
  co_return name;
}

inline auto quick() {
  return sp::RetryPolicy().initial_backoff(1ms).max_backoff(5ms);
}

}  // namespace safety

TEMPLATE_LIST_TEST_CASE("run resolves an unknown commit outcome by resending the same request",
                        "[conformance][safety][idempotency]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    TestType fx(ex);
    sp::test::FaultyBackend<B> faulty(fx.backend());
    sp::Manager<sp::test::FaultyBackend<B>> m(faulty);
    const auto r = co_await safety::make_resource(m, fx.resource("unknown-run"), R"({"n": 0})");
    int calls = 0;
    auto increment = [&](sp::Session<sp::test::FaultyBackend<B>>& s) -> asio::awaitable<int> {
      ++calls;
      auto n = safety::as_int(co_await s.read("n"));
      co_await s.write("n", n + 1);
      co_return n + 1;
    };
    // Applied, then the reply is lost: the resend is a replay, fn is not run again.
    faulty.commits_applied_then_unknown = 1;
    const auto key1 = fx.resource("increment-1");
    int v = co_await m.run(sp::SessionOptions("agent").resource(r).idempotency_key(key1), increment,
                           safety::quick());
    CHECK(v == 1);
    CHECK(calls == 1);
    CHECK(faulty.commits_sent == 2);
    auto after1 = co_await fx.backend().read(r, "n");
    CHECK(after1.value == sp::Value(1));  // applied exactly once

    // Lost before it arrived: the resend applies it, once.
    calls = 0;
    faulty.commits_lost_unknown = 2;
    const auto key2 = fx.resource("increment-2");
    v = co_await m.run(sp::SessionOptions("agent").resource(r).idempotency_key(key2), increment,
                       safety::quick());
    CHECK(v == 2);
    CHECK(calls == 1);
    auto after2 = co_await fx.backend().read(r, "n");
    CHECK(after2.value == sp::Value(2));

    // Still unknown when the attempts run out: the CommitUnknownError propagates, fn ran once.
    calls = 0;
    faulty.commits_lost_unknown = 100;
    const auto key3 = fx.resource("increment-3");
    auto unknown = co_await sp::test::thrown<sp::CommitUnknownError>([&] {
      return m.run(sp::SessionOptions("agent").resource(r).idempotency_key(key3), increment,
                   safety::quick().max_attempts(3));
    });
    CHECK(unknown);
    CHECK(calls == 1);
    faulty.commits_lost_unknown = 0;

    // Applied, then the server stays down through every resend: the outcome is still unknown,
    // and run() must say so, never "not applied" (BackendUnavailableError).
    calls = 0;
    faulty.commits_applied_then_unknown = 1;
    faulty.commits_unavailable = 100;
    const auto key4 = fx.resource("increment-4");
    auto still_unknown = co_await sp::test::thrown<sp::CommitUnknownError>([&] {
      return m.run(sp::SessionOptions("agent").resource(r).idempotency_key(key4), increment,
                   safety::quick().max_attempts(3));
    });
    CHECK(still_unknown);
    CHECK(calls == 1);
    faulty.commits_unavailable = 0;
    auto after4 = co_await fx.backend().read(r, "n");
    CHECK(after4.value == sp::Value(3));  // it was applied, once

    // Without a key nothing can be resent safely: the error propagates at once.
    calls = 0;
    faulty.commits_applied_then_unknown = 1;
    auto unkeyed = co_await sp::test::thrown<sp::CommitUnknownError>(
        [&] { return m.run(sp::SessionOptions("agent").resource(r), increment, safety::quick()); });
    REQUIRE(unkeyed);
    CHECK(!unkeyed->retryable());
    CHECK(calls == 1);
  });
}

TEMPLATE_LIST_TEST_CASE("a session resends a commit of unknown outcome on request",
                        "[conformance][safety][idempotency]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    TestType fx(ex);
    sp::test::FaultyBackend<B> faulty(fx.backend());
    sp::Manager<sp::test::FaultyBackend<B>> m(faulty);
    const auto r = co_await safety::make_resource(m, fx.resource("unknown-session"), R"({"n": 0})");
    faulty.commits_applied_then_unknown = 1;
    auto s = co_await m.session(
        sp::SessionOptions("agent").resource(r).idempotency_key(fx.resource("resend")));
    co_await s.write("n", 7);
    auto lost = co_await sp::test::thrown<sp::CommitUnknownError>([&] { return s.commit(); });
    CHECK(lost);
    CHECK(s.outcome_unknown());
    auto resent = co_await s.resend_commit();
    CHECK(resent.replayed);
    CHECK(!s.outcome_unknown());
    auto after = co_await fx.backend().read(r, "n");
    CHECK(after.value == sp::Value(7));
    CHECK(after.version == 1);  // written once
    auto misuse = co_await sp::test::thrown<sp::UsageError>([&] { return s.resend_commit(); });
    CHECK(misuse);
  });
}

TEMPLATE_LIST_TEST_CASE("a resend that waits for a lock keeps the commit's outcome unknown",
                        "[conformance][safety][idempotency]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    TestType fx(ex);
    sp::test::FaultyBackend<B> faulty(fx.backend());
    sp::Manager<sp::test::FaultyBackend<B>> m(faulty);
    const auto r = co_await safety::make_resource(m, fx.resource("unknown-locked"), R"({"n": 0})");
    int calls = 0;
    auto increment = [&](sp::Session<sp::test::FaultyBackend<B>>& s) -> asio::awaitable<int> {
      ++calls;
      auto n = safety::as_int(co_await s.read("n"));
      co_await s.write("n", n + 1);
      co_return n + 1;
    };
    // Applied, its reply lost; the resends then wait for the idempotency key's lock, which the
    // first commit still holds (a synchronous standby that does not answer), and time out.
    faulty.commits_applied_then_unknown = 1;
    faulty.commits_failing = 2;
    faulty.commit_failure = std::make_exception_ptr(sp::LockTimeoutError("test: lock_timeout"));
    int v = co_await m.run(
        sp::SessionOptions("agent").resource(r).idempotency_key(fx.resource("locked-1")), increment,
        safety::quick());
    CHECK(v == 1);
    CHECK(calls == 1);  // never run again while the first commit may stand
    CHECK(faulty.commits_sent == 4);
    auto after = co_await fx.backend().read(r, "n");
    CHECK(after.value == sp::Value(1));
    CHECK(after.version == 1);

    // Resends that keep timing out: unknown, never LockTimeoutError, and fn ran once.
    calls = 0;
    faulty.commits_applied_then_unknown = 1;
    faulty.commits_failing = 100;
    auto unknown = co_await sp::test::thrown<sp::CommitUnknownError>([&] {
      return m.run(sp::SessionOptions("agent").resource(r).idempotency_key(fx.resource("locked-2")),
                   increment, safety::quick().max_attempts(3));
    });
    CHECK(unknown);
    CHECK(calls == 1);
    faulty.commits_failing = 0;

    // The same through a session: the resend's lock timeout is an unknown outcome, resendable.
    faulty.commits_applied_then_unknown = 1;
    faulty.commits_failing = 1;
    auto s = co_await m.session(
        sp::SessionOptions("agent").resource(r).idempotency_key(fx.resource("locked-3")));
    co_await s.write("n", 9);
    auto lost = co_await sp::test::thrown<sp::CommitUnknownError>([&] { return s.commit(); });
    CHECK(lost);
    auto still =
        co_await sp::test::thrown<sp::CommitUnknownError>([&] { return s.resend_commit(); });
    REQUIRE(still);
    CHECK(still->retryable());
    CHECK(s.outcome_unknown());
    auto resent = co_await s.resend_commit();
    CHECK(resent.replayed);
  });
}

TEMPLATE_LIST_TEST_CASE("no resend once the idempotency record may have expired",
                        "[conformance][safety][idempotency]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    TestType fx(ex);
    sp::test::FaultyBackend<B> faulty(fx.backend());
    sp::Manager<sp::test::FaultyBackend<B>> m(faulty);
    const auto r = co_await safety::make_resource(m, fx.resource("unknown-late"), R"({"n": 0})");
    int calls = 0;
    auto increment = [&](sp::Session<sp::test::FaultyBackend<B>>& s) -> asio::awaitable<int> {
      ++calls;
      auto n = safety::as_int(co_await s.read("n"));
      co_await s.write("n", n + 1);
      co_return n + 1;
    };
    // Storage keeps records 400 ms here: resends are safe for 200 ms after the first send. The
    // first commit is applied, and its loss is reported only 250 ms later.
    faulty.retention = 400ms;
    faulty.commits_applied_then_unknown = 1;
    faulty.lost_reply_delay = 250ms;
    auto late = co_await sp::test::thrown<sp::CommitUnknownError>([&] {
      return m.run(sp::SessionOptions("agent").resource(r).idempotency_key(fx.resource("late-1")),
                   increment, safety::quick());
    });
    REQUIRE(late);
    CHECK(!late->retryable());
    CHECK(calls == 1);
    CHECK(faulty.commits_sent == 1);  // nothing resent
    auto after = co_await fx.backend().read(r, "n");
    CHECK(after.version == 1);

    // The same through a session: the resend is refused without being sent.
    faulty.commits_applied_then_unknown = 1;
    auto s = co_await m.session(
        sp::SessionOptions("agent").resource(r).idempotency_key(fx.resource("late-2")));
    co_await s.write("n", 5);
    auto lost = co_await sp::test::thrown<sp::CommitUnknownError>([&] { return s.commit(); });
    CHECK(lost);
    const int sent = faulty.commits_sent;
    auto refused =
        co_await sp::test::thrown<sp::CommitUnknownError>([&] { return s.resend_commit(); });
    REQUIRE(refused);
    CHECK(!refused->retryable());
    CHECK(faulty.commits_sent == sent);
    CHECK(s.outcome_unknown());
    faulty.lost_reply_delay = 0ms;

    // A policy whose resends could outlast the window is refused before anything runs.
    calls = 0;
    auto bad = co_await sp::test::thrown<sp::InvalidArgumentError>([&] {
      return m.run(sp::SessionOptions("agent").resource(r).idempotency_key(fx.resource("late-3")),
                   increment, sp::RetryPolicy().initial_backoff(50ms).max_backoff(100ms));
    });
    CHECK(bad);
    CHECK(calls == 0);
    // Without a key nothing is resent, so the same policy is fine.
    int v = co_await m.run(sp::SessionOptions("agent").resource(r), increment,
                           sp::RetryPolicy().initial_backoff(50ms).max_backoff(100ms));
    CHECK(v == 6);  // 1 from late-1, 5 written by late-2 (applied), then this increment
  });
}

TEMPLATE_LIST_TEST_CASE("hold survives a renewal that fails once with a foreign error",
                        "[conformance][safety][hold]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    TestType fx(ex);
    sp::test::FaultyBackend<B> faulty(fx.backend());
    sp::LeaseManager<sp::test::FaultyBackend<B>> leases(faulty, 30s);
    const auto r = fx.resource("hold-transient");
    faulty.renewals_failing = 1;
    bool lost_seen = false;
    auto body = [&](sp::HeldLease& held) -> asio::awaitable<int> {
      // Long enough for the failed renewal and at least one good one after it.
      co_await sp::test::eventually([&] { return faulty.renewals_sent >= 3; }, 10s,
                                    "three renewals");
      lost_seen = held.lost();
      co_return 42;
    };
    auto opts = sp::HoldOptions().ttl(3s).auto_renew(true).renew_every(40ms);
    int v = co_await leases.hold(r, "worker-a", body, opts);
    CHECK(v == 42);
    CHECK(!lost_seen);
    CHECK(faulty.renewals_sent >= 3);
  });
}

TEMPLATE_LIST_TEST_CASE("hold reports a lease lost to failing renewals, with the cause nested",
                        "[conformance][safety][hold]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    TestType fx(ex);
    sp::test::FaultyBackend<B> faulty(fx.backend());
    sp::LeaseManager<sp::test::FaultyBackend<B>> leases(faulty, 30s);
    const auto r = fx.resource("hold-failing");
    faulty.renewals_failing = 1000;
    faulty.renewal_failure = "READONLY You can't write against a read only replica.";
    bool saw_loss = false;
    auto body = [&](sp::HeldLease& held) -> asio::awaitable<void> {
      co_await sp::test::eventually([&] { return held.lost(); }, 10s, "the loss");
      saw_loss = held.lost();
    };
    auto opts =
        sp::HoldOptions().ttl(600ms).auto_renew(true).renew_every(150ms).cancel_on_loss(false);
    std::string what;
    bool nested_cause = false;
    try {  // thrown<E>() would copy the error and drop the nested cause
      co_await leases.hold(r, "worker-a", body, opts);
    } catch (const sp::LeaseLostError& e) {
      what = e.what();
      try {
        std::rethrow_if_nested(e);
      } catch (const std::runtime_error& cause) {
        nested_cause = std::string(cause.what()).find("READONLY") == 0;
      }
    }
    CHECK(saw_loss);
    CHECK(what.find("READONLY") != std::string::npos);
    CHECK(nested_cause);
    CHECK(faulty.renewals_sent >= 3);  // retried, not given up at the first failure
  });
}

TEMPLATE_LIST_TEST_CASE("a fenced-off commit names the agent whose session carried the token",
                        "[conformance][safety][fencing]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    TestType fx(ex);
    sp::Manager<B> m(fx.backend());
    const auto r = fx.resource("fenced-names");
    auto old = co_await m.lease(r, "worker-a", fx.short_ttl());
    co_await fx.advance(fx.short_ttl() + 50ms);
    auto fresh = co_await m.lease(r, "worker-b", 30s);
    auto s = co_await m.session(sp::SessionOptions("agent-7").resource(r).fence(old.token));
    co_await s.write("k", 1);
    auto err = co_await sp::test::thrown<sp::LeaseLostError>([&] { return s.commit(); });
    REQUIRE(err);
    CHECK(err->agent_id() == "agent-7");
    CHECK(err->owner().empty());
    CHECK(err->token() == old.token);
    CHECK(err->current_fence() == fresh.token);
    CHECK(std::string(err->what()).find("agent-7") != std::string::npos);
  });
}

namespace safety {

inline std::string deep(int levels, bool objects) {
  std::string s;
  for (int i = 0; i < levels; ++i) s += objects ? "{\"k\":" : "[";
  s += "1";
  for (int i = 0; i < levels; ++i) s += objects ? "}" : "]";
  return s;
}

inline sp::Value string_value(std::string bytes) {
  return sp::Value(std::move(bytes));  // nlohmann stores bytes as given; dump() would refuse them
}

// Values no backend stores faithfully. Built outside coroutines: g++ 12 miscompiles braced
// initializer lists inside them.
inline std::vector<std::pair<std::string, sp::Value>> bad_values() {
  std::vector<std::pair<std::string, sp::Value>> out;
  const double inf = std::numeric_limits<double>::infinity();
  auto add = [&](std::string name, sp::Value v) {
    out.emplace_back(std::move(name), std::move(v));
  };
  add("NaN", std::nan(""));
  add("+inf", inf);
  add("-inf", -inf);
  add("NaN in an array", sp::Value::array({1, std::nan("")}));
  add("inf in an object", sp::Value::object({{"x", inf}}));
  add("string with byte 0xff", string_value("a\xff"));
  add("truncated UTF-8", string_value("a\xe2\x82"));
  add("overlong UTF-8", string_value("\xc0\x80"));
  add("UTF-8 surrogate", string_value("\xed\xa0\x80"));
  add("past U+10FFFF", string_value("\xf4\x90\x80\x80"));
  add("U+0000 in a string", string_value(std::string("a\0b", 3)));
  add("U+0000 in a nested string", sp::Value::array({string_value(std::string("\0", 1))}));
  add("object key not UTF-8", sp::Value::object({{std::string("\xff"), 1}}));
  add("object key with U+0000", sp::Value::object({{std::string("a\0", 2), 1}}));
  add("101 nested arrays", sp::Value::parse(deep(101, false)));
  add("101 nested objects", sp::Value::parse(deep(101, true)));
  add("1000 nested arrays", sp::Value::parse(deep(1000, false)));
  add("a value over 1 MiB", std::string((1 << 20) + 1, 'x'));
  return out;
}

}  // namespace safety

TEMPLATE_LIST_TEST_CASE("bad input is refused with InvalidArgumentError and changes nothing",
                        "[conformance][safety][validation]", ConformanceFixtures) {
  // Duration options of the library itself have upper bounds too.
  CHECK_THROWS_AS(sp::RetryPolicy().max_backoff(2h), sp::InvalidArgumentError);
  CHECK_THROWS_AS(sp::RetryPolicy().initial_backoff(2h), sp::InvalidArgumentError);
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    TestType fx(ex);
    sp::Manager<B> m(fx.backend());
    sp::LeaseManager<B> leases(fx.backend(), 30s);
    const auto r = co_await safety::make_resource(m, fx.resource("bad-input"), R"({"a": 1})");
    const auto other = co_await safety::make_resource(m, fx.resource("bad-other"), R"({})");
    auto lease = co_await m.lease(r, "worker-a", 30s);

    // A write of `value` to `key` of r in a fenced session, then commit.
    auto write = [&](std::string key, sp::Value value) {
      return [&m, &r, &lease, key = std::move(key),
              value = std::move(value)]() -> asio::awaitable<void> {
        auto s = co_await m.session(sp::SessionOptions("agent").resource(r).fence(lease.token));
        co_await s.write("ok", 1);  // a good write in the same commit must not land either
        co_await s.write(key, value);
        co_await s.commit();
      };
    };
    using Case = std::pair<std::string, std::function<asio::awaitable<void>()>>;
    std::vector<Case> cases;
    auto add = [&](std::string name, std::function<asio::awaitable<void>()> f) {
      cases.emplace_back(std::move(name), std::move(f));
    };
    for (auto& bad : safety::bad_values()) add(bad.first, write("k", bad.second));
    add("a commit over 16 MiB", [&]() -> asio::awaitable<void> {
      auto s = co_await m.session(sp::SessionOptions("agent").resource(r));
      const std::string chunk(1000000, 'y');
      for (int i = 0; i < 17; ++i) co_await s.write("big-" + std::to_string(i), chunk);
      co_await s.commit();
    });
    add("empty key", write("", 1));
    add("key with a control character", write("a\nb", 1));
    add("key of 257 bytes", write(std::string(257, 'k'), 1));
    add("key not UTF-8", write("\xfe", 1));
    add("write to a resource not in the session", [&]() -> asio::awaitable<void> {
      auto s = co_await m.session(sp::SessionOptions("agent").resource(r));
      co_await s.write(other, "k", 1);
      co_await s.commit();
    });
    add("initial state not an object", [&]() -> asio::awaitable<void> {
      co_await m.register_resource(fx.resource("bad-new-1"), sp::Value::array());
    });
    sp::Value nan_state = sp::Value::object();
    nan_state["x"] = std::nan("");
    add("initial state holding NaN", [&m, &fx, nan_state]() -> asio::awaitable<void> {
      co_await m.register_resource(fx.resource("bad-new-2"), nan_state);
    });
    sp::Value empty_key_state = sp::Value::object();
    empty_key_state[""] = 1;
    add("initial state with an empty key", [&m, &fx, empty_key_state]() -> asio::awaitable<void> {
      co_await m.register_resource(fx.resource("bad-new-3"), empty_key_state);
    });
    auto take = [&](std::string resource, std::string owner, sp::milliseconds ttl) {
      return [&m, resource = std::move(resource), owner = std::move(owner),
              ttl]() -> asio::awaitable<void> { co_await m.lease(resource, owner, ttl); };
    };
    add("lease ttl 0", take(r, "worker-b", 0ms));
    add("lease ttl negative", take(r, "worker-b", -5ms));
    add("lease ttl over 7 days", take(r, "worker-b", std::chrono::hours(24 * 8)));
    add("lease owner empty", take(r, "", 30s));
    add("lease resource empty", take("", "worker-b", 30s));
    add("lease resource of 257 bytes", take(std::string(257, 'r'), "worker-b", 30s));
    add("renewal ttl over 7 days", [&]() -> asio::awaitable<void> {
      co_await fx.backend().renew_lease(lease, std::chrono::hours(24 * 8));
    });
    add("lock_timeout of 0", [&]() -> asio::awaitable<void> {
      co_await m.session(sp::SessionOptions("agent").resource(r).lock_timeout(0ms));
    });
    add("lock_timeout over an hour", [&]() -> asio::awaitable<void> {
      co_await m.session(sp::SessionOptions("agent").resource(r).lock_timeout(2h));
    });
    add("fence token 0", [&]() -> asio::awaitable<void> {
      co_await m.session(sp::SessionOptions("agent").resource(r).fence(0));
    });
    add("fence token never issued", [&]() -> asio::awaitable<void> {
      auto s = co_await m.session(sp::SessionOptions("agent").resource(r).fence(lease.token + 5));
      co_await s.write("k", 1);
      co_await s.commit();
    });
    add("idempotency key with a control character", [&]() -> asio::awaitable<void> {
      co_await m.session(sp::SessionOptions("agent").resource(r).idempotency_key("a\tb"));
    });
    add("hold wait over 7 days", [&]() -> asio::awaitable<void> {
      auto body = [](const sp::Lease&) -> asio::awaitable<void> { co_return; };
      co_await leases.hold(r, "worker-b", body, sp::HoldOptions().wait(std::chrono::hours(24 * 8)));
    });
    add("hold renew_every not below the ttl", [&]() -> asio::awaitable<void> {
      auto body = [](const sp::Lease&) -> asio::awaitable<void> { co_return; };
      co_await leases.hold(r, "worker-b", body,
                           sp::HoldOptions().ttl(1s).auto_renew(true).renew_every(1s));
    });
    REQUIRE(cases.size() >= 30);

    std::vector<std::string> both;
    both.push_back(r);
    both.push_back(other);
    auto before = co_await fx.backend().snapshot(both);
    const sp::Token fence_before = co_await fx.backend().current_fence(r);
    std::vector<std::string> not_refused, changed;
    for (auto& c : cases) {
      const std::string& name = c.first;
      auto& attempt = c.second;
      auto err = co_await sp::test::thrown<sp::InvalidArgumentError>(attempt);
      auto after = co_await fx.backend().snapshot(both);
      const sp::Token fence_after = co_await fx.backend().current_fence(r);
      if (!err) not_refused.push_back(name);
      bool same = after.size() == before.size() && fence_after == fence_before;
      for (std::size_t i = 0; same && i < after.size(); ++i)
        same = after[i].version == before[i].version && after[i].entries == before[i].entries;
      if (!same) changed.push_back(name);
    }
    auto unregistered = co_await sp::test::thrown<sp::ResourceNotFoundError>(
        [&] { return fx.backend().resource_policy(fx.resource("bad-new-1")); });
    CHECK(unregistered);  // the refused registrations created nothing
    CHECK(not_refused.empty());
    CHECK(changed.empty());
  });
}

TEMPLATE_LIST_TEST_CASE("a fence-required resource refuses unfenced writes inside the commit",
                        "[conformance][safety][fencing]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    TestType fx(ex);
    sp::Manager<B> m(fx.backend());
    sp::ResourcePolicy required;
    required.fence_required = true;
    const auto r =
        co_await safety::make_resource(m, fx.resource("required"), R"({"n": 0})", required);
    const auto free = co_await safety::make_resource(m, fx.resource("free"), R"({"n": 0})");
    auto policy = co_await fx.backend().resource_policy(r);
    CHECK(policy.fence_required);
    auto free_policy = co_await fx.backend().resource_policy(free);
    CHECK(!free_policy.fence_required);

    // No lease ever: nothing can carry a current token, so no write lands.
    auto s0 = co_await m.session(sp::SessionOptions("agent").resource(r));
    co_await s0.write("n", 1);
    auto refused0 = co_await sp::test::thrown<sp::FenceRequiredError>([&] { return s0.commit(); });
    REQUIRE(refused0);
    CHECK(refused0->resource() == r);
    CHECK(refused0->agent_id() == "agent");
    CHECK(!refused0->retryable());

    auto lease = co_await m.lease(r, "worker-a", fx.short_ttl());
    {  // fenced: lands
      auto s = co_await m.session(sp::SessionOptions("worker-a").resource(r).fence(lease.token));
      co_await s.write("n", 1);
      co_await s.commit();
    }
    {  // unfenced write, and an unfenced erase: refused, nothing applied
      auto s = co_await m.session(sp::SessionOptions("forgetful").resource(r));
      co_await s.write("n", 2);
      auto refused = co_await sp::test::thrown<sp::FenceRequiredError>([&] { return s.commit(); });
      CHECK(refused);
      auto e = co_await m.session(sp::SessionOptions("forgetful").resource(r));
      co_await e.erase("n");
      auto refused_erase =
          co_await sp::test::thrown<sp::FenceRequiredError>([&] { return e.commit(); });
      CHECK(refused_erase);
    }
    {  // two resources, only the free one fenced... or neither: the required one is named
      auto s = co_await m.session(sp::SessionOptions("agent").resource(r).resource(free));
      co_await s.write(free, "n", 5);
      co_await s.write(r, "n", 5);
      auto refused = co_await sp::test::thrown<sp::FenceRequiredError>([&] { return s.commit(); });
      REQUIRE(refused);
      CHECK(refused->resource() == r);
    }
    auto after = co_await fx.backend().read(r, "n");
    CHECK(after.value == sp::Value(1));
    CHECK(after.version == 1);
    auto free_after = co_await fx.backend().read(free, "n");
    CHECK(free_after.version == 0);  // the refused two-resource commit applied nothing
    {  // reads stay free: a read-only session over it commits, and so do writes to the other
      auto s = co_await m.session(sp::SessionOptions("reader").resource(r).resource(free));
      auto n = safety::as_int(co_await s.read(r, "n"));
      CHECK(n == 1);
      co_await s.write(free, "n", n);
      co_await s.commit();
    }
    {  // a stale token is still a lost lease, not a missing fence
      co_await fx.advance(fx.short_ttl() + 50ms);
      auto next = co_await m.lease(r, "worker-b", 30s);
      CHECK(next.token > lease.token);
      auto s = co_await m.session(sp::SessionOptions("worker-a").resource(r).fence(lease.token));
      co_await s.write("n", 9);
      auto stale = co_await sp::test::thrown<sp::LeaseLostError>([&] { return s.commit(); });
      CHECK(stale);
    }
    // Registering again does not change the policy; setting it does.
    auto created = co_await m.register_resource(r, sp::Value::object(), sp::ResourcePolicy{});
    CHECK(!created);
    auto still = co_await fx.backend().resource_policy(r);
    CHECK(still.fence_required);
    co_await m.set_resource_policy(r, sp::ResourcePolicy{});
    {
      auto s = co_await m.session(sp::SessionOptions("anyone").resource(r));
      co_await s.write("n", 3);
      co_await s.commit();
    }
    auto missing = co_await sp::test::thrown<sp::ResourceNotFoundError>(
        [&] { return m.set_resource_policy(fx.resource("never-registered"), required); });
    CHECK(missing);
    auto missing_read = co_await sp::test::thrown<sp::ResourceNotFoundError>(
        [&] { return fx.backend().resource_policy(fx.resource("never-registered")); });
    CHECK(missing_read);
  });
}

TEMPLATE_LIST_TEST_CASE("lease and hold can register a resource as fence required",
                        "[conformance][safety][fencing]", ConformanceFixtures) {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    using B = typename TestType::backend_type;
    TestType fx(ex);
    sp::Manager<B> m(fx.backend());
    sp::LeaseManager<B> leases(fx.backend(), 30s);
    sp::ResourcePolicy required;
    required.fence_required = true;
    // An existing resource gets the policy from lease(..., policy).
    const auto r = co_await safety::make_resource(m, fx.resource("lease-policy"), R"({})");
    auto lease = co_await m.lease(r, "worker-a", 30s, required);
    auto p = co_await fx.backend().resource_policy(r);
    CHECK(p.fence_required);
    co_await fx.backend().release_lease(lease);

    // hold() registers a new resource with it, and a fenced session inside it works.
    const auto h = fx.resource("hold-policy");
    auto body = [&](const sp::Lease& l) -> asio::awaitable<int> {
      auto s = co_await m.session(sp::SessionOptions("worker-a").resource(h).fence(l.token));
      co_await s.write("n", 1);
      co_await s.commit();
      auto unfenced = co_await m.session(sp::SessionOptions("worker-a").resource(h));
      co_await unfenced.write("n", 2);
      auto refused =
          co_await sp::test::thrown<sp::FenceRequiredError>([&] { return unfenced.commit(); });
      co_return refused ? 1 : 0;
    };
    int refused = co_await leases.hold(h, "worker-a", body, sp::HoldOptions().policy(required));
    CHECK(refused == 1);
    auto hp = co_await fx.backend().resource_policy(h);
    CHECK(hp.fence_required);
    auto n = co_await fx.backend().read(h, "n");
    CHECK(n.value == sp::Value(1));
  });
}
