// Names that look like SQL, with quotes, backslashes and unicode, are stored and returned
// literally: every statement passes them as parameters, never as SQL text.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <statepact/postgres.hpp>
#include <statepact/statepact.hpp>

#include "../conformance/postgres_fixture.hpp"
#include "../support/run.hpp"

namespace sp = statepact;

namespace {

// Built outside the coroutine: g++ 12 cannot compile a braced list inside one.
std::vector<std::string> sql_like_names() {
  return {
      "'; DROP TABLE statepact_leases; --",
      "\"quoted\" 'single' `back`",
      "back\\slash \\\\ \\x00 \\n",
      "$1 $$ $tag$ %s %% :name ?",
      "заказ-42 ✓ 日本語 🚀",
      "Robert'); DELETE FROM statepact_keys WHERE ('1'='1",
  };
}

}  // namespace

TEST_CASE("names that look like SQL are stored literally", "[postgres][integration]") {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::test::PostgresFixture fx(ex);
    auto& b = fx.backend();
    sp::Manager<sp::PostgresBackend> m(b);
    const std::vector<std::string> names = sql_like_names();
    for (const auto& base : names) {
      const auto r = fx.resource(base);
      const std::string owner = base + " owner";
      auto lease = co_await m.lease(r, owner, 30s);
      CHECK(lease.resource == r);
      CHECK(lease.owner == owner);
      CHECK(lease.token == 1);
      auto fence = co_await b.current_fence(r);
      CHECK(fence == 1);
      auto s = co_await m.session(
          sp::SessionOptions(base).resource(r).fence(lease.token).idempotency_key(r + "#k"));
      sp::Value v = sp::Value::object();
      v["text"] = base;
      v["nested"] = sp::Value::array();
      v["nested"].push_back(base);
      co_await s.write(base, v);
      auto res = co_await s.commit();
      CHECK(res.versions.at(r) == 1);
      auto e = co_await b.read(r, base);
      CHECK(e.value == v);
      CHECK(e.version == 1);
      std::vector<std::string> one(1, r);
      auto snaps = co_await b.snapshot(one);
      REQUIRE(snaps.size() == 1);
      CHECK(snaps[0].resource == r);
      CHECK(snaps[0].entries.count(base) == 1);
      auto released = co_await b.release_lease(lease);
      CHECK(released);
    }
    // The tables are all still there: a fresh lease works.
    auto after = co_await b.acquire_lease(fx.resource("after-names"), "worker", 30s);
    CHECK(after.token == 1);
  });
}
