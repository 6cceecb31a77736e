// A token is never issued twice, even when the fence counter vanishes behind the backend's back
// (an operator's DEL, a restore): the token in the lease hash is a floor under it.
#include <string>

#include <catch2/catch.hpp>

#include <statepact/redis.hpp>
#include <statepact/statepact.hpp>

#include "../support/run.hpp"
#include "../support/sleep.hpp"
#include "redis_admin.hpp"

namespace sp = statepact;
using namespace std::chrono_literals;

namespace {

sp::CommitRequest fenced_write(const std::string& resource, sp::Token token, int value) {
  sp::CommitRequest req;
  req.agent_id = "agent";
  req.resources = {resource};
  req.fences.push_back(sp::FenceCheck{resource, token});
  req.writes.push_back(sp::WriteOp{resource, "k", sp::Value(value)});
  return req;
}

void delete_fence_keys(sp::test::RedisAdmin& admin, const std::string& prefix) {
  const auto keys = admin.keys_matching(prefix + ":fence:*");
  REQUIRE(keys.size() == 1);
  admin.command({"DEL", keys.front()});
}

}  // namespace

TEST_CASE("a deleted fence counter never lets a token be issued twice or a stale one pass",
          "[redis][integration]") {
  const std::string prefix = "fence-" + sp::test::random_hex();
  sp::test::run([&prefix](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::RedisBackend b(ex, sp::test::redis_test_url(), sp::RedisOptions().key_prefix(prefix));
    sp::test::RedisAdmin admin;
    const std::string r = "job";
    co_await b.register_resource(r);
    auto first = co_await b.acquire_lease(r, "a", 30s);
    co_await b.release_lease(first);
    auto a = co_await b.acquire_lease(r, "a", 300ms);
    REQUIRE(a.token == 2);

    delete_fence_keys(admin, prefix);
    // The live lease still holds its token: the high-water mark is unchanged everywhere.
    const auto fence = co_await b.current_fence(r);
    CHECK(fence == a.token);
    auto by_a = co_await b.commit(fenced_write(r, a.token, 1));
    CHECK(by_a.versions.at(r) == 1);

    co_await sp::test::sleep_for(400ms);  // a's lease expires; its hash is still there
    auto bee = co_await b.acquire_lease(r, "b", 30s);
    CHECK(bee.token > a.token);
    bool fenced_off = false;
    try {
      co_await b.commit(fenced_write(r, a.token, 2));
    } catch (const sp::LeaseLostError& e) {
      fenced_off = e.current_fence() == bee.token;
    }
    CHECK(fenced_off);

    // Released, the lease keeps its token as the floor.
    co_await b.release_lease(bee);
    delete_fence_keys(admin, prefix);
    auto c = co_await b.acquire_lease(r, "c", 30s);
    CHECK(c.token > bee.token);
    const auto entry = co_await b.read(r, "k");
    CHECK(entry.value == sp::Value(1));
  });
}
