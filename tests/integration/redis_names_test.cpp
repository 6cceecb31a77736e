// Names that look like separators, hash tags or injections are just names: nothing collides.
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <statepact/redis.hpp>
#include <statepact/statepact.hpp>

#include "../support/run.hpp"
#include "redis_admin.hpp"

namespace sp = statepact;

namespace {

asio::awaitable<void> put(sp::Manager<sp::RedisBackend>& m, std::string resource, std::string key,
                          sp::Value v) {
  auto s = co_await m.session(sp::SessionOptions("writer").resource(resource));
  co_await s.write(key, v);
  co_await s.commit();
}

}  // namespace

TEST_CASE("resource and key names never collide, whatever they contain", "[redis][integration]") {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::RedisBackend b(ex, sp::test::redis_test_url());
    sp::Manager<sp::RedisBackend> m(b);
    const std::string base = "names-" + sp::test::random_hex() + "-";
    // (resource, key) pairs, several of which would be the same string if concatenated.
    const std::vector<std::pair<std::string, std::string>> cells = {
        {base + "a:b", "c"},
        {base + "a", "b:c"},
        {base + "a", "b"},
        {base + "a:b:c", "x"},
        {base + "{a}", "k"},
        {base + "a}", "{k"},
        {base + "}{", "}{"},
        {base + "with space", "a key with spaces"},
        {base + "заказ-✓", "ключ"},
        {base + "quote\"'\\; DROP TABLE x; --", "' OR 1=1 --"},
        {base + "lua]]..redis.call('FLUSHALL')--", "%s%d"},
    };
    for (std::size_t i = 0; i < cells.size(); ++i) {
      co_await m.register_resource(cells[i].first, sp::Value::object());
      co_await put(m, cells[i].first, cells[i].second, sp::Value(static_cast<int>(i)));
    }
    for (std::size_t i = 0; i < cells.size(); ++i) {
      auto e = co_await b.read(cells[i].first, cells[i].second);
      CHECK(e.value == sp::Value(static_cast<int>(i)));
    }
    // Each resource holds exactly its own keys.
    for (const auto& [resource, key] : cells) {
      std::vector<std::string> one;
      one.push_back(resource);
      auto snaps = co_await b.snapshot(one);
      REQUIRE(snaps.size() == 1);
      std::size_t expected = 0;
      for (const auto& c : cells) expected += c.first == resource ? 1 : 0;
      CHECK(snaps[0].entries.size() == expected);
      CHECK(snaps[0].entries.count(key) == 1);
    }
    // Leases and fences are per resource too: each distinct resource starts with no token, and
    // its first lease gets token 1 whatever leases the names around it took.
    std::set<std::string> resources;
    for (const auto& c : cells) resources.insert(c.first);
    for (const auto& resource : resources) {
      INFO("resource " << resource);
      auto existing = co_await b.current_fence(resource);
      CHECK(existing == 0);
      auto l = co_await b.acquire_lease(resource, "owner", std::chrono::seconds(30));
      CHECK(l.token == 1);
      CHECK(l.resource == resource);
    }
    // A name that is a prefix of another shares nothing with it.
    auto fa = co_await b.current_fence(base + "a");
    auto fab = co_await b.current_fence(base + "a:b");
    CHECK(fa == 1);
    CHECK(fab == 1);
  });
}

namespace {

std::string hex_of(const std::string& s) {
  std::string out;
  for (unsigned char c : s) out += fmt::format("{:02x}", c);
  return out;
}

// Moves every key of `resource` (a name with a group) back to the form versions before Redis
// Cluster support wrote: "<prefix>:<kind>:{<hex name>}" instead of "=<hex name>{<hex group>}".
// Returns how many keys it moved.
int write_in_earlier_form(sp::test::RedisAdmin& admin, const std::string& prefix,
                          const std::string& resource, const std::string& group) {
  const std::string grouped = "=" + hex_of(resource) + "{" + hex_of(group) + "}";
  const std::string earlier = "{" + hex_of(resource) + "}";
  int moved = 0;
  for (const auto& key : admin.keys_matching(prefix + ":*")) {
    const auto at = key.find(grouped);
    if (at == std::string::npos) continue;
    std::string old = key;
    old.replace(at, grouped.size(), earlier);
    REQUIRE(admin.command({"RENAME", key, old}) == "OK");
    ++moved;
  }
  return moved;
}

}  // namespace

TEST_CASE("keys an earlier version wrote for names with a group are moved, fences never lowered",
          "[redis][integration]") {
  using namespace std::chrono_literals;
  sp::test::RedisAdmin admin;
  const std::string prefix = "upgrade-" + sp::test::random_hex();
  const std::string items = "{order-17}/items", payment = "{order-17}/payment", plain = "plain";
  sp::test::run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::RedisBackend b(ex, sp::test::redis_test_url(), sp::RedisOptions().key_prefix(prefix));
    sp::Manager<sp::RedisBackend> m(b);
    // `items`: registered, leased twice, written under its fence, then left as an earlier
    // version would have stored it.
    sp::Value stock = sp::Value::object();
    stock["stock"] = 5;
    co_await m.register_resource(items, stock);
    auto first = co_await b.acquire_lease(items, "worker-a", 30s);
    co_await b.release_lease(first);
    auto held = co_await b.acquire_lease(items, "worker-b", 30s);
    {
      auto s = co_await m.session(sp::SessionOptions("worker-b").resource(items).fence(held.token));
      co_await s.write("stock", sp::Value(4));
      co_await s.commit();
    }
    co_await m.register_resource(plain, sp::Value::object());
    // `payment`: its fence reached 3 under the earlier form; then this version, not seeing it,
    // leased it again from token 1 before the upgrade ran.
    for (int i = 0; i < 3; ++i) {
      auto l = co_await b.acquire_lease(payment, "worker-a", 30s);
      co_await b.release_lease(l);
    }
    const int items_keys = write_in_earlier_form(admin, prefix, items, "order-17");
    const int payment_keys = write_in_earlier_form(admin, prefix, payment, "order-17");
    CHECK(items_keys >= 5);    // lease, fence, version, state, policy
    CHECK(payment_keys == 2);  // lease, fence
    const auto hidden = co_await b.current_fence(items);
    CHECK(hidden == 0);  // what the hazard looks like
    // An acquire sees the earlier form too: tokens go on above its mark.
    auto early = co_await b.acquire_lease(payment, "worker-n", 30s);
    CHECK(early.token == 4);
    co_await b.release_lease(early);
    // A lease the earlier form holds is another owner's; a resource registered only in the
    // earlier form is not registered again beside it.
    bool busy = false;
    try {
      co_await b.acquire_lease(items, "worker-n", 30s);
    } catch (const sp::LeaseNotAvailableError& e) {
      busy = e.holder() == "worker-b";
    }
    CHECK(busy);
    bool refused = false;
    try {
      co_await b.register_resource(items, stock);
    } catch (const sp::ConfigurationError& e) {
      refused = std::string(e.what()).find("upgrade_key_layout") != std::string::npos;
    }
    CHECK(refused);

    const auto up = co_await b.upgrade_key_layout();
    CHECK(up.resources == 2);
    CHECK(up.keys_moved == static_cast<std::size_t>(items_keys + 1));  // payment's fence merged
    CHECK(up.left == std::vector<std::string>{payment + " lease"});
    // Everything of `items` is back: its lease, fence, state and policy.
    auto holder = co_await b.lease_holder(items);
    REQUIRE(holder);
    CHECK(holder->owner == "worker-b");
    CHECK(holder->token == held.token);
    const auto items_fence = co_await b.current_fence(items);
    CHECK(items_fence == held.token);
    const auto entry = co_await b.read(items, "stock");
    CHECK(entry.value == sp::Value(4));
    const bool released = co_await b.release_lease(held);
    CHECK(released);
    auto next = co_await b.acquire_lease(items, "worker-c", 30s);
    CHECK(next.token == held.token + 1);
    // `payment`'s fence is the larger mark of the two forms: no token is issued twice.
    const auto payment_fence = co_await b.current_fence(payment);
    CHECK(payment_fence == 4);
    auto after = co_await b.acquire_lease(payment, "worker-z", 30s);
    CHECK(after.token == 5);
    // A plain name's keys never moved; a second run moves nothing and reports the same lease.
    const auto plain_found = co_await b.list_resources(std::string("plain"));
    CHECK(plain_found.size() == 1);
    const auto again = co_await b.upgrade_key_layout();
    CHECK(again.keys_moved == 0);
    CHECK(again.left == up.left);
  });
  for (const auto& key : admin.keys_matching(prefix + ":*")) admin.command({"DEL", key});
}
