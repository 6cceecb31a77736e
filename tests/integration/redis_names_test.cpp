// Names that look like separators, hash tags or injections are just names: nothing collides.
#include <set>
#include <string>
#include <vector>

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
