// A resource's policy lives in its own key in the resource's slot; storage enforces it inside the
// commit script. A resource registered before policies were stored (no policy key) keeps the
// default policy.
#include <string>

#include <catch2/catch.hpp>

#include <statepact/redis.hpp>
#include <statepact/statepact.hpp>

#include "../support/run.hpp"
#include "redis_admin.hpp"

namespace sp = statepact;
using namespace std::chrono_literals;

namespace {

sp::CommitRequest write_one(const std::string& resource, std::optional<sp::Token> fence) {
  sp::CommitRequest req;
  req.agent_id = "writer";
  req.resources = {resource};
  if (fence) req.fences.push_back(sp::FenceCheck{resource, *fence});
  req.writes.push_back(sp::WriteOp{resource, "k", sp::Value(1)});
  return req;
}

}  // namespace

TEST_CASE("a fence-required policy is stored with the resource and enforced by the commit script",
          "[redis][integration]") {
  const std::string prefix = "policy-" + sp::test::random_hex();
  sp::test::run([&prefix](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::RedisBackend b(ex, sp::test::redis_test_url(), sp::RedisOptions().key_prefix(prefix));
    sp::test::RedisAdmin admin;
    const std::string r = "guarded";
    const bool created = co_await b.register_resource(r, sp::Value::object(), {true});
    CHECK(created);
    // A second registration changes nothing, policy included.
    const bool again = co_await b.register_resource(r, sp::Value::object(), {false});
    CHECK_FALSE(again);
    const auto policy = co_await b.resource_policy(r);
    CHECK(policy.fence_required);
    CHECK(admin.keys_matching(prefix + ":policy:*").size() == 1);

    bool refused = false;
    try {
      co_await b.commit(write_one(r, std::nullopt));
    } catch (const sp::FenceRequiredError& e) {
      refused = e.resource() == r && e.agent_id() == "writer" && !e.retryable();
    }
    CHECK(refused);
    const auto unchanged = co_await b.read(r, "k");
    CHECK(unchanged.version == 0);

    auto lease = co_await b.acquire_lease(r, "holder", 30s);
    auto done = co_await b.commit(write_one(r, lease.token));
    CHECK(done.versions.at(r) == 1);

    // Data from before policies were stored has no policy key: the default policy.
    for (const auto& key : admin.keys_matching(prefix + ":policy:*")) admin.command({"DEL", key});
    const auto old_data = co_await b.resource_policy(r);
    CHECK_FALSE(old_data.fence_required);
    auto free_write = co_await b.commit(write_one(r, std::nullopt));
    CHECK(free_write.versions.at(r) == 2);

    co_await b.set_resource_policy(r, sp::ResourcePolicy{true});
    const auto set_again = co_await b.resource_policy(r);
    CHECK(set_again.fence_required);
    bool missing = false;
    try {
      co_await b.set_resource_policy("never-registered", sp::ResourcePolicy{true});
    } catch (const sp::ResourceNotFoundError&) {
      missing = true;
    }
    CHECK(missing);
    // Nothing was created for the unregistered one ("never-registered" in hex).
    CHECK(admin.keys_matching(prefix + ":*{6e657665722d72656769737465726564}*").empty());
  });
}
