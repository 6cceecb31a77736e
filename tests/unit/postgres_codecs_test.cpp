// The PostgreSQL lease, state and lock codecs against canned answer rows (text format, as the
// server sends them), answers the functions never give included; values as JSON text for jsonb.
// No server.
#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "../postgres/jsonb_text.hpp"
#include "../postgres/lease_codec.hpp"
#include "../postgres/state_codec.hpp"

namespace sp = statepact;
namespace d = statepact::detail;
namespace pg = statepact::detail::pg;
using namespace std::chrono_literals;

namespace {

const pg::Field sql_null;

pg::Rows one(pg::Row row) {
  return pg::Rows{std::move(row)};
}

sp::time_point at_us(long long us) {
  return sp::time_point(
      std::chrono::duration_cast<sp::Clock::duration>(std::chrono::microseconds(us)));
}

template <class F>
void check_unexpected(F f, const std::string& function) {
  try {
    f();
    FAIL("accepted an answer " << function << " never gives");
  } catch (const sp::Error& e) {
    CHECK(std::string(e.what()) == "PostgreSQL: unexpected answer from " + function);
    CHECK_FALSE(e.retryable());
  }
}

const sp::Lease pg_lease{"job", "w1", 4, at_us(5'000'000), 1000ms};

}  // namespace

TEST_CASE("postgres lease codec: acquire and renew", "[codec][postgres]") {
  const auto ok = pg::decode_acquire(one({"ok", "w1", "4", "5000000", "1000"}), "job");
  CHECK(ok.verdict == d::Verdict::ok);
  CHECK(ok.lease == pg_lease);
  const auto busy = pg::decode_acquire(one({"busy", "w2", "3", "7000000", "500"}), "job");
  CHECK(busy.verdict == d::Verdict::busy);
  CHECK(busy.lease.owner == "w2");
  check_unexpected(
      [] {
        pg::decode_acquire(one({"lost", "w1", "4", "5", "1"}), "job");
      },
      "statepact_acquire");
  check_unexpected(
      [] {
        pg::decode_acquire(one({"ok", sql_null, "4", "5", "1"}), "job");
      },
      "statepact_acquire");
  check_unexpected([] { pg::decode_acquire({}, "job"); }, "statepact_acquire");

  const auto renewed = pg::decode_renew(one({"ok", "4", "9000000", "2000"}), pg_lease);
  CHECK(renewed.verdict == d::Verdict::ok);
  CHECK(renewed.lease == sp::Lease{"job", "w1", 4, at_us(9'000'000), 2000ms});
  // A refusal names its loss; the token column is then the high-water mark.
  const auto lost = pg::decode_renew(one({"superseded", "6", sql_null, sql_null}), pg_lease);
  CHECK(lost.verdict == d::Verdict::lost);
  CHECK(lost.loss == d::LeaseLoss::superseded);
  CHECK(lost.high_water == 6);
  CHECK(pg::decode_renew(one({"none", "0", sql_null, sql_null}), pg_lease).loss ==
        d::LeaseLoss::none);
  check_unexpected(
      [] {
        pg::decode_renew(one({"stolen", "6", sql_null, sql_null}), pg_lease);
      },
      "statepact_renew");
  check_unexpected(
      [] {
        pg::decode_renew(one({"ok", "5", "9000000", "2000"}), pg_lease);
      },
      "statepact_renew");
}

TEST_CASE("postgres lease codec: release, fence, revoke, live leases", "[codec][postgres]") {
  CHECK(pg::decode_release(one({"t"})));
  CHECK_FALSE(pg::decode_release(one({"f"})));
  check_unexpected([] { pg::decode_release(one({"true"})); }, "statepact_release");
  CHECK(pg::decode_fence(one({"12"})) == 12);
  check_unexpected([] { pg::decode_fence(one({"-1"})); }, "statepact_current_fence");
  check_unexpected([] { pg::decode_fence(one({sql_null})); }, "statepact_current_fence");

  const auto revoked =
      pg::decode_revoke(one({"revoked", "w1", "4", "5000000", "1000", "5"}), "job");
  REQUIRE(revoked);
  CHECK(*revoked == sp::RevokedLease{pg_lease, 5});
  CHECK_FALSE(
      pg::decode_revoke(one({"none", sql_null, sql_null, sql_null, sql_null, sql_null}), "job"));
  check_unexpected(
      [] {
        pg::decode_revoke(one({"revoked", "w1", "4", "5000000", "1000", "3"}), "job");
      },
      "statepact_revoke");

  const pg::Rows rows{{"job-1", "w1", "4", "5000000", "1000", "4000000"},
                      {"other", "w2", "1", "5000000", "1000", "4000000"}};
  const auto all = pg::decode_live_leases(rows, std::nullopt);
  REQUIRE(all.size() == 2);
  CHECK(all[0].expires_in == 1000ms);
  const auto some = pg::decode_live_leases(rows, std::string("job-*"));
  REQUIRE(some.size() == 1);
  CHECK(some[0].resource == "job-1");
  check_unexpected(
      [] {
        pg::decode_live_leases({{"job", "w1", "x", "5", "1", "4"}}, std::nullopt);
      },
      "statepact_live_leases");
}

TEST_CASE("postgres state codec: register, policy, read, missing", "[codec][postgres]") {
  CHECK(pg::decode_register(one({"t"})));
  CHECK(pg::decode_set_policy(one({"t"}), "job").verdict == d::Verdict::ok);
  CHECK(pg::decode_set_policy(one({"f"}), "job").missing == "job");
  CHECK(pg::decode_policy(one({"t"}), "job").value.fence_required);
  CHECK(pg::decode_policy(one({sql_null}), "job").verdict == d::Verdict::resource_not_found);

  const auto read = pg::decode_read(one({"t", "{\"a\":1}", "3"}), "job");
  CHECK(read.value == sp::Entry{sp::Value{{"a", 1}}, 3});
  CHECK(pg::decode_read(one({"t", sql_null, "0"}), "job").value == sp::Entry{});
  CHECK(pg::decode_read(one({"f", sql_null, "0"}), "job").missing == "job");
  check_unexpected([] { pg::decode_read(one({"t", "{oops", "3"}), "job"); }, "statepact_read");

  CHECK(pg::decode_missing(one({sql_null})).verdict == d::Verdict::ok);
  CHECK(pg::decode_missing(one({"b"})).missing == "b");

  const auto listed = pg::decode_list_resources({{"a", "2", "t"}, {"b", "0", "f"}}, "a*");
  REQUIRE(listed.size() == 1);
  CHECK(listed[0] == sp::ResourceInfo{"a", 2, sp::ResourcePolicy{true}});
}

TEST_CASE("postgres state codec: snapshot", "[codec][postgres]") {
  const std::vector<std::string> names{"a", "b"};
  const pg::Rows rows{{"a", "t", "3", "x", "1", "3"},
                      {"a", "t", "3", "y", sql_null, "2"},
                      {"b", "t", "0", sql_null, sql_null, sql_null}};
  const auto snap = pg::decode_snapshot(rows, names);
  REQUIRE(snap.verdict == d::Verdict::ok);
  REQUIRE(snap.value.size() == 2);
  CHECK(snap.value[0].version == 3);
  CHECK(snap.value[0].entries.at("x") == sp::Entry{sp::Value(1), 3});
  CHECK(snap.value[0].entries.at("y") == sp::Entry{std::nullopt, 2});
  CHECK(snap.value[1].entries.empty());
  const pg::Rows gone{{"a", "t", "3", sql_null, sql_null, sql_null},
                      {"b", "f", sql_null, sql_null, sql_null, sql_null}};
  CHECK(pg::decode_snapshot(gone, names).missing == "b");
  check_unexpected(
      [&] {
        pg::decode_snapshot({{"c", "t", "0", sql_null, sql_null, sql_null}}, names);
      },
      "statepact_snapshot");
}

TEST_CASE("postgres lock codec", "[codec][postgres]") {
  const auto granted = pg::decode_lock(one({"ok", "\"v\"", "2"}));
  CHECK(granted.verdict == d::Verdict::ok);
  CHECK(granted.entry == sp::Entry{sp::Value("v"), 2});
  CHECK(pg::decode_lock(one({"ok", sql_null, "0"})).entry == sp::Entry{});  // not yet written
  for (auto v : {d::Verdict::resource_not_found, d::Verdict::deadlock, d::Verdict::timeout,
                 d::Verdict::cancelled})
    CHECK(pg::decode_lock(one({std::string(d::name_of(v)), sql_null, sql_null})).verdict == v);
  // The words of schema versions before 4 are not the shared vocabulary.
  check_unexpected(
      [] {
        pg::decode_lock(one({"not_found", sql_null, sql_null}));
      },
      "statepact_lock");
  check_unexpected([] { pg::decode_lock(one({"missing", sql_null, "0"})); }, "statepact_lock");
  check_unexpected([] { pg::decode_lock(one({"busy", sql_null, sql_null})); }, "statepact_lock");
}

TEST_CASE("postgres values: doubles jsonb would change are written so that they come back",
          "[codec][postgres]") {
  auto text = [](double x) { return pg::jsonb_text(sp::Value(x)); };
  // A numeric keeps its scale but not the sign of zero, and reads an exponent as digits.
  CHECK(text(-0.0) == "-1e-400");
  CHECK(text(1e15) == "1000000000000000.0");
  CHECK(text(-1e15) == "-1000000000000000.0");
  CHECK(text(1e16) == "10000000000000000.0");
  CHECK(text(1.5e17) == "150000000000000000.0");
  CHECK(text(1152921504606846976.0) == "1152921504606846976.0");
  const std::string huge = text(1e300);
  CHECK(huge.size() == 303);
  CHECK(huge.rfind("1000000000000000052504760255204420248704468581108159", 0) == 0);
  CHECK(huge.substr(huge.size() - 2) == ".0");
  // Every other number as Value::dump() writes it.
  for (double x : {0.0, 1.5, -2.25, 1e14, 999999999999999.0, 1e15 + 0.5, 1e-7, 5e-324, 0.1})
    CHECK(text(x) == sp::Value(x).dump());
  CHECK(pg::jsonb_text(sp::Value(1000000000000000000LL)) == "1000000000000000000");
  // Nested, with keys that need escaping; a value without such doubles is dump()'s text.
  sp::Value doc = sp::Value::object();
  doc["a\"b"] = sp::Value::array({sp::Value(-0.0), sp::Value(1), sp::Value("x")});
  doc["c"] = sp::Value::object();
  doc["c"]["d"] = 1e16;
  CHECK(pg::jsonb_text(doc) == R"({"a\"b":[-1e-400,1,"x"],"c":{"d":10000000000000000.0}})");
  CHECK(sp::Value::parse(pg::jsonb_text(doc)) == doc);
  sp::Value plain = sp::Value::parse(R"({"a":[1,2.5,"\u00e9"],"b":null})");
  CHECK(pg::jsonb_text(plain) == plain.dump());

  // What jsonb sends back for them is read as the same doubles.
  auto bits = [](double x) { return std::bit_cast<std::uint64_t>(x); };
  auto read = [](std::string field) {
    return pg::json_at(pg::Row{std::move(field)}, 0, "statepact_read").value();
  };
  const auto zero = read("-0." + std::string(399, '0') + "1");
  REQUIRE(zero.is_number_float());
  CHECK(bits(zero.get<double>()) == bits(-0.0));
  for (double x : {1e15, 1e16, 1.5e17, 1152921504606846976.0, -1e18, 1e300}) {
    const auto back = read(text(x));
    REQUIRE(back.is_number_float());
    CHECK(bits(back.get<double>()) == bits(x));
  }
}
