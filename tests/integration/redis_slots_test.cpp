// A single-resource workload keeps every key it creates in one Redis Cluster hash slot: the
// resource is the hash tag of its lease, fence, version, state and idempotency records.
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>

#include <statepact/detail/fingerprint.hpp>
#include <statepact/redis.hpp>
#include <statepact/statepact.hpp>

#include "../support/run.hpp"
#include "redis_admin.hpp"

namespace sp = statepact;
using namespace std::chrono_literals;

namespace {

// CRC16-CCITT (XMODEM), the checksum Redis Cluster takes of a key's hash tag.
std::uint16_t crc16(std::string_view s) {
  std::uint16_t crc = 0;
  for (unsigned char c : s) {
    crc ^= static_cast<std::uint16_t>(c << 8);
    for (int i = 0; i < 8; ++i)
      crc = (crc & 0x8000) ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021)
                           : static_cast<std::uint16_t>(crc << 1);
  }
  return crc;
}

// Redis Cluster's rule: the part between the first '{' and the next '}', if not empty, else the
// whole key.
int hash_slot(std::string_view key) {
  const auto open = key.find('{');
  if (open != std::string_view::npos) {
    const auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1)
      key = key.substr(open + 1, close - open - 1);
  }
  return crc16(key) % 16384;
}

}  // namespace

TEST_CASE("the cluster slot checksum is Redis's", "[redis][integration]") {
  CHECK(crc16("123456789") == 0x31C3);  // the check value of CRC16-XMODEM
  CHECK(hash_slot("{user1000}.following") == hash_slot("{user1000}.followers"));
  CHECK(hash_slot("foo{}{bar}") == crc16("foo{}{bar}") % 16384);  // an empty tag: the whole key
  CHECK(hash_slot("foo{{bar}}zap") == crc16("{bar") % 16384);     // up to the first '}'
}

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
      slots.insert(hash_slot(k));
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
