// A database made by the first schema version is migrated in place when a newer backend first
// connects: every resource, key, lease and idempotency record stays, existing resources get the
// default policy (no fence required), and the new policy is enforced from then on.
#include <fstream>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>
#include <pqxx/pqxx>

#include <statepact/postgres.hpp>
#include <statepact/statepact.hpp>

#include "../support/expect.hpp"
#include "../support/run.hpp"
#include "postgres_admin.hpp"

namespace sp = statepact;
using namespace std::chrono_literals;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Builds `schema` the way the first released version did: its SQL, recorded as version 1, then
// one resource with a committed key, a lease and an idempotency record, through its functions.
void make_v1_schema(pqxx::connection& conn, const std::string& schema) {
  pqxx::work w(conn);
  const std::string s = w.quote_name(schema);
  w.exec("CREATE SCHEMA " + s);
  w.exec("SET LOCAL search_path = " + s);
  w.exec(
      "CREATE TABLE statepact_schema_version (version integer PRIMARY KEY, "
      "applied_at timestamptz NOT NULL DEFAULT now())");
  w.exec(read_file(STATEPACT_SOURCE_DIR "/src/postgres/schema_v1.sql"));
  w.exec("INSERT INTO statepact_schema_version (version) VALUES (1)");
  w.exec("SELECT statepact_register('orders', '{\"count\": 1}'::jsonb)");
  w.exec("SELECT * FROM statepact_acquire('orders', 'worker-a', 60000)");
  w.exec(
      "SELECT statepact_commit('{\"resources\": [\"orders\"], \"fences\": [], \"checks\": [], "
      "\"writes\": [{\"resource\": \"orders\", \"key\": \"count\", \"value\": 2}], "
      "\"idempotency_key\": \"order-1\", \"fingerprint\": \"fp-1\", "
      "\"retention_ms\": 3600000}'::jsonb)");
  w.commit();
}

}  // namespace

TEST_CASE("a version 1 schema is migrated and keeps its data", "[postgres][integration]") {
  const std::string schema = "migrate_" + sp::test::run_suffix();
  sp::test::PostgresAdmin admin;
  make_v1_schema(admin.connection(), schema);
  struct Drop {
    sp::test::PostgresAdmin& admin;
    std::string schema;
    ~Drop() {
      pqxx::nontransaction n(admin.connection());
      n.exec("DROP SCHEMA IF EXISTS " + n.quote_name(schema) + " CASCADE");
    }
  } drop{admin, schema};

  sp::test::run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::PostgresBackend b(ex, sp::test::postgres_test_url(),
                          sp::PostgresOptions().schema(schema).pool_size(1));
    // Data written by version 1 is all there.
    auto e = co_await b.read("orders", "count");
    CHECK(e.value == sp::Value(2));
    CHECK(e.version == 1);
    auto fence = co_await b.current_fence("orders");
    CHECK(fence == 1);
    auto policy = co_await b.resource_policy("orders");
    CHECK_FALSE(policy.fence_required);

    sp::CommitRequest replay;
    replay.agent_id = "agent";
    replay.resources = {"orders"};
    replay.writes.push_back(sp::WriteOp{"orders", "count", sp::Value(2)});
    replay.idempotency_key = "order-1";
    replay.fingerprint = "fp-1";
    auto replayed = co_await b.commit(replay);
    CHECK(replayed.replayed);
    CHECK(replayed.versions.at("orders") == 1);

    // The new policy works on the migrated resource.
    co_await b.set_resource_policy("orders", sp::ResourcePolicy{true});
    policy = co_await b.resource_policy("orders");
    CHECK(policy.fence_required);
    sp::CommitRequest unfenced;
    unfenced.agent_id = "agent";
    unfenced.resources = {"orders"};
    unfenced.writes.push_back(sp::WriteOp{"orders", "count", sp::Value(3)});
    auto refused =
        co_await sp::test::thrown<sp::FenceRequiredError>([&] { return b.commit(unfenced); });
    REQUIRE(refused);
    CHECK(refused->resource() == "orders");
    CHECK(refused->agent_id() == "agent");
    sp::CommitRequest fenced = unfenced;
    fenced.fences.push_back(sp::FenceCheck{"orders", fence});
    auto applied = co_await b.commit(fenced);
    CHECK(applied.versions.at("orders") == 2);

    // A resource registered now gets its policy with it; registering it again changes nothing.
    auto created = co_await b.register_resource("audit", sp::Value::object(), {true});
    CHECK(created);
    auto again = co_await b.register_resource("audit", sp::Value::object(), {false});
    CHECK_FALSE(again);
    policy = co_await b.resource_policy("audit");
    CHECK(policy.fence_required);
  });

  // Every later version recorded once, after version 1.
  pqxx::nontransaction n(admin.connection());
  auto versions = n.exec("SELECT array_agg(version ORDER BY version)::text FROM " +
                         n.quote_name(schema) + ".statepact_schema_version");
  std::string every = "{1";
  for (int v = 2; v <= sp::PostgresBackend::latest_schema_version(); ++v)
    every += "," + std::to_string(v);
  CHECK(versions.at(0)[0].as<std::string>() == every + "}");
}
