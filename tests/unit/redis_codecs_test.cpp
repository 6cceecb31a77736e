// The Redis lease, state and lock codecs against canned replies: the calls they lay out, the
// answers they read, and replies the scripts never give. No server.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "key_layout.hpp"  // src/redis
#include "lease_codec.hpp"
#include "state_codec.hpp"

#include "../support/redis_replies.hpp"

namespace sp = statepact;
namespace d = statepact::detail;
using namespace std::chrono_literals;
using sp::test::arr;
using sp::test::nil;
using sp::test::num;
using sp::test::str;
using sp::test::words;

namespace {

sp::time_point at_ms(long long ms) {
  return sp::time_point(std::chrono::duration_cast<sp::Clock::duration>(sp::milliseconds(ms)));
}

// What a reply the script never gives must be: a non-retryable statepact::Error naming the call.
template <class F>
void check_malformed(F f, const std::string& what) {
  try {
    f();
    FAIL("accepted a malformed reply to " << what);
  } catch (const sp::Error& e) {
    CHECK(std::string(e.what()) == "redis: unexpected reply to " + what);
    CHECK_FALSE(e.retryable());
  }
}

const d::KeyLayout layout("sp");
const sp::Lease lease_w1{"job", "w1", 4, at_ms(5000), 1000ms};

}  // namespace

TEST_CASE("redis lease codec: acquire", "[codec][redis]") {
  const auto call = d::encode_acquire(layout, "job", "w1", 1500ms);
  CHECK(call.keys == std::vector<std::string>{layout.lease("job"), layout.fence("job")});
  CHECK(call.args == std::vector<std::string>{"w1", "1500"});

  const auto ok = d::decode_acquire(words({"ok", "7", "9000"}), "job", "w1", 1500ms);
  CHECK(ok.verdict == d::Verdict::ok);
  CHECK(ok.lease == sp::Lease{"job", "w1", 7, at_ms(9000), 1500ms});

  const auto busy = d::decode_acquire(words({"busy", "w2", "6", "8000"}), "job", "w1", 1500ms);
  CHECK(busy.verdict == d::Verdict::busy);
  CHECK(busy.lease.owner == "w2");
  CHECK(busy.lease.token == 6);
  CHECK(busy.lease.expires_at == at_ms(8000));

  check_malformed(
      [] {
        d::decode_acquire(words({"lost", "7", "9000"}), "job", "w1", 1s);
      },
      "acquire");
  check_malformed(
      [] {
        d::decode_acquire(words({"ok", "-7", "9000"}), "job", "w1", 1s);
      },
      "acquire");
  check_malformed([] { d::decode_acquire(words({"ok", "7"}), "job", "w1", 1s); }, "acquire");
  check_malformed([] { d::decode_acquire(str("OK"), "job", "w1", 1s); }, "acquire");
}

TEST_CASE("redis lease codec: renew, release, fence", "[codec][redis]") {
  const auto call = d::encode_renew(layout, lease_w1, 2s);
  CHECK(call.keys == std::vector<std::string>{layout.lease("job"), layout.fence("job")});
  CHECK(call.args == std::vector<std::string>{"w1", "4", "2000"});

  const auto ok = d::decode_renew(words({"ok", "4", "12000"}), lease_w1, 2s);
  CHECK(ok.verdict == d::Verdict::ok);
  CHECK(ok.lease == sp::Lease{"job", "w1", 4, at_ms(12000), 2000ms});

  const auto lost = d::decode_renew(words({"lost", "superseded", "9"}), lease_w1, 2s);
  CHECK(lost.verdict == d::Verdict::lost);
  CHECK(lost.loss == d::LeaseLoss::superseded);
  CHECK(lost.high_water == 9);

  check_malformed([] { d::decode_renew(words({"lost", "stolen", "9"}), lease_w1, 2s); }, "renew");
  // A renewal that answers with another token renewed some other lease.
  check_malformed([] { d::decode_renew(words({"ok", "5", "12000"}), lease_w1, 2s); }, "renew");

  CHECK(d::encode_release(layout, lease_w1).args == std::vector<std::string>{"w1", "4"});
  CHECK(d::decode_release(num(1)));
  CHECK_FALSE(d::decode_release(num(0)));
  check_malformed([] { d::decode_release(num(2)); }, "release");
  check_malformed([] { d::decode_release(str("1")); }, "release");

  CHECK(d::encode_fence(layout, "job").keys ==
        std::vector<std::string>{layout.fence("job"), layout.lease("job")});
  CHECK(d::decode_fence(str("12")) == 12);
  check_malformed([] { d::decode_fence(num(12)); }, "current_fence");
  check_malformed([] { d::decode_fence(str("12x")); }, "current_fence");
}

TEST_CASE("redis lease codec: revoke and lease_info", "[codec][redis]") {
  const auto revoked = d::decode_revoke(words({"revoked", "w1", "4", "5000", "1000", "5"}), "job");
  REQUIRE(revoked);
  CHECK(revoked->lease == lease_w1);
  CHECK(revoked->fence == 5);
  CHECK_FALSE(d::decode_revoke(words({"none"}), "job"));
  check_malformed(
      [] {
        d::decode_revoke(words({"revoked", "w1", "4", "5000", "1000", "4"}), "job");
      },
      "revoke");
  check_malformed([] { d::decode_revoke(words({"ok"}), "job"); }, "revoke");

  const auto live = d::decode_live_lease(words({"w1", "4", "5000", "1000"}), "job", 4000);
  REQUIRE(live);
  CHECK(live->owner == "w1");
  CHECK(live->expires_in == 1000ms);
  CHECK_FALSE(d::decode_live_lease(words({"w1", "4", "5000", "1000"}), "job", 5000));
  CHECK_FALSE(d::decode_live_lease(arr({nil(), str("4"), nil(), nil()}), "job", 0));
  check_malformed([] { d::decode_live_lease(words({"w1", "4", "5000"}), "job", 0); }, "lease_info");
}

TEST_CASE("redis state codec: entries, read, snapshot, policy", "[codec][redis]") {
  CHECK(d::decode_entry(nil()) == sp::Entry{});
  CHECK(d::decode_entry(str("3 {\"a\":1}")) == sp::Entry{sp::Value{{"a", 1}}, 3});
  CHECK(d::decode_entry(str("4")) == sp::Entry{std::nullopt, 4});  // a tombstone
  check_malformed([] { d::decode_entry(str("3 {oops")); }, "a state entry");
  check_malformed([] { d::decode_entry(str("x 1")); }, "a state entry");

  CHECK(d::encode_read(layout, "job", "k").args == std::vector<std::string>{"k"});
  const auto read = d::decode_read(arr({str("ok"), str("2 7")}), "job");
  CHECK(read.verdict == d::Verdict::ok);
  CHECK(read.value == sp::Entry{sp::Value(7), 2});
  const auto gone = d::decode_read(words({"resource_not_found"}), "job");
  CHECK(gone.verdict == d::Verdict::resource_not_found);
  CHECK(gone.missing == "job");
  check_malformed([] { d::decode_read(words({"not_found"}), "job"); }, "read");

  const std::vector<std::string> names{"a", "b"};
  CHECK(d::encode_snapshot(layout, names).keys ==
        std::vector<std::string>{layout.version("a"), layout.state("a"), layout.version("b"),
                                 layout.state("b")});
  const auto snap = d::decode_snapshot(
      arr({str("ok"), str("3"), words({"x", "3 1", "y", "2"}), str("0"), arr({})}), names);
  REQUIRE(snap.verdict == d::Verdict::ok);
  REQUIRE(snap.value.size() == 2);
  CHECK(snap.value[0].version == 3);
  CHECK(snap.value[0].entries.at("x") == sp::Entry{sp::Value(1), 3});
  CHECK(snap.value[0].entries.at("y") == sp::Entry{std::nullopt, 2});
  CHECK(snap.value[1].resource == "b");
  CHECK(snap.value[1].entries.empty());
  CHECK(d::decode_snapshot(words({"resource_not_found", "2"}), names).missing == "b");
  check_malformed(
      [&] {
        d::decode_snapshot(words({"resource_not_found", "3"}), names);
      },
      "snapshot");
  check_malformed(
      [&] {
        d::decode_snapshot(arr({str("ok"), str("3"), words({"x"})}), names);
      },
      "snapshot");

  CHECK(d::decode_policy(arr({str("ok"), str("1")}), "job").value.fence_required);
  CHECK_FALSE(d::decode_policy(arr({str("ok"), nil()}), "job").value.fence_required);
  CHECK(d::decode_policy(words({"resource_not_found"}), "job").missing == "job");
  check_malformed([] { d::decode_policy(arr({str("ok"), str("yes")}), "job"); }, "resource_policy");
  CHECK(d::encode_set_policy(layout, "job", sp::ResourcePolicy{true}).args ==
        std::vector<std::string>{"1"});
  CHECK(d::decode_set_policy(num(1), "job").verdict == d::Verdict::ok);
  CHECK(d::decode_set_policy(num(0), "job").missing == "job");
}

TEST_CASE("redis state codec: register, exists, resource_info", "[codec][redis]") {
  const auto call = d::encode_register(layout, "job", sp::Value{{"k", "v"}}, {true});
  CHECK(call.keys ==
        std::vector<std::string>{layout.version("job"), layout.state("job"), layout.policy("job")});
  CHECK(call.args == std::vector<std::string>{"1", "k", "0 \"v\""});
  CHECK(d::decode_register(num(1), "job"));
  CHECK_FALSE(d::decode_register(num(0), "job"));
  CHECK_THROWS_AS(d::decode_register(num(-1), "{g}/job"), sp::ConfigurationError);

  const std::vector<std::string> names{"a", "b"};
  CHECK(d::decode_exists(num(0), names).verdict == d::Verdict::ok);
  CHECK(d::decode_exists(num(2), names).missing == "b");
  check_malformed([&] { d::decode_exists(num(3), names); }, "begin_session");
  check_malformed([&] { d::decode_exists(num(-1), names); }, "begin_session");

  const auto infos =
      d::decode_resource_info(arr({arr({str("5"), str("1")}), arr({nil(), nil()})}), names);
  REQUIRE(infos.size() == 2);
  CHECK(*infos[0] == sp::ResourceInfo{"a", 5, sp::ResourcePolicy{true}});
  CHECK_FALSE(infos[1]);  // deleted since the scan
  check_malformed([&] { d::decode_resource_info(arr({}), names); }, "list_resources");
}

TEST_CASE("redis lock codec: lock, wait, unlock", "[codec][redis]") {
  const auto call = d::encode_lock(layout, "inst:3", "job", "k", sp::LockMode::exclusive, 30s, 2s);
  CHECK(call.keys == std::vector<std::string>{layout.lock("job", "k"), layout.version("job"),
                                              layout.state("job"), layout.lock_queue("job", "k")});
  CHECK(call.args == std::vector<std::string>{"inst:3", "X", "30000", "k", "2000"});
  CHECK(d::encode_lock(layout, "inst:3", "job", "k", sp::LockMode::shared, 30s, 2s).args[1] == "S");

  const auto granted = d::decode_lock(arr({str("ok"), str("1 \"v\"")}));
  CHECK(granted.verdict == d::Verdict::ok);
  CHECK(granted.entry == sp::Entry{sp::Value("v"), 1});
  CHECK(d::decode_lock(arr({str("ok"), nil()})).entry == sp::Entry{});
  const auto waiting = d::decode_lock(words({"wait", "inst:1", "inst:2"}));
  CHECK(waiting.verdict == d::Verdict::wait);
  CHECK(waiting.holders == std::vector<std::string>{"inst:1", "inst:2"});
  CHECK(d::decode_lock(words({"resource_not_found"})).verdict == d::Verdict::resource_not_found);
  check_malformed([] { d::decode_lock(words({"wait"})); }, "lock");
  check_malformed([] { d::decode_lock(words({"deadlock"})); }, "lock");

  const auto wait = d::encode_wait(layout, "inst:3", {"inst:1"}, 2s);
  CHECK(wait.keys == std::vector<std::string>{layout.waits()});
  CHECK(wait.args == std::vector<std::string>{"inst:3", "2000", "inst:1"});
  CHECK(d::decode_wait(str("wait")) == d::Verdict::wait);
  CHECK(d::decode_wait(str("deadlock")) == d::Verdict::deadlock);
  check_malformed([] { d::decode_wait(str("ok")); }, "wait");

  const auto unlock = d::encode_unlock({"L1", "L2"}, "inst:3");
  CHECK(unlock.keys == std::vector<std::string>{"L1", "L2"});
  CHECK(unlock.args == std::vector<std::string>{"inst:3"});
}
