// Every commit through statepact_commit purges a batch of expired idempotency records. It must
// find them through the expiry index: bounded by a volatile clock, the purge scanned the whole
// table of live records in every commit (with a million of them, 2,268 commits a second became 15).
#include <string>

#include <catch2/catch.hpp>
#include <pqxx/pqxx>

#include <statepact/postgres.hpp>
#include <statepact/statepact.hpp>

#include "../support/run.hpp"
#include "postgres_admin.hpp"

namespace sp = statepact;

TEST_CASE("a commit's purge of expired idempotency records does not scan the live ones",
          "[postgres][integration]") {
  sp::test::run([](asio::any_io_executor ex) -> asio::awaitable<void> {
    const std::string schema = "purge_" + sp::test::run_suffix();
    {
      sp::PostgresBackend b(ex, sp::test::postgres_test_url(),
                            sp::PostgresOptions().schema(schema));
      co_await b.migrate();
      co_await b.register_resource("orders");
    }
    pqxx::connection conn(sp::test::postgres_test_url());
    {
      pqxx::work w(conn);
      w.exec("SET LOCAL search_path = " + w.quote_name(schema));
      w.exec(
          "INSERT INTO statepact_idempotency SELECT 'live-' || i, 'fp', '{}'::jsonb, "
          "now() + interval '1 day' FROM generate_series(1, 20000) i");
      w.exec("ANALYZE statepact_idempotency");  // the planner knows they are all live
      w.commit();
    }
    {
      pqxx::work w(conn);
      w.exec("SET LOCAL search_path = " + w.quote_name(schema));
      const auto answer = w.exec1(
                               "SELECT statepact_commit('{\"resources\": [\"orders\"], \"fences\": "
                               "[], \"checks\": [], \"writes\": [{\"resource\": \"orders\", "
                               "\"key\": \"n\", \"value\": 1}], \"idempotency_key\": \"order-1\", "
                               "\"fingerprint\": \"fp-1\", \"retention_ms\": 60000}'::jsonb)")[0]
                              .as<std::string>();
      CHECK(answer.find("\"versions\"") != std::string::npos);
      // This transaction's own scans of the table: the record lookup, its insert and the purge.
      const auto scans = w.exec1(
          "SELECT seq_scan, idx_scan FROM pg_stat_xact_user_tables "
          "WHERE relid = 'statepact_idempotency'::regclass");
      CHECK(scans[0].as<long>() == 0);
      CHECK(scans[1].as<long>() >= 1);
      w.commit();
    }
    pqxx::nontransaction n(conn);
    n.exec("DROP SCHEMA " + n.quote_name(schema) + " CASCADE");
  });
}
