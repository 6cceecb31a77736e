// A server clock that steps back (an NTP step, a resumed VM) while an acquisition runs must never
// hand the expired owner's token to a new owner: storage would then take the old owner's fenced
// writes as the new owner's. The step is made by a clock_timestamp() of a schema searched before
// pg_catalog, which steps back 2 s after its N-th call; every N from 0 to 5 puts the step before,
// between and after the readings of one acquisition. The backend sets its connections' search_path
// to its own schema alone (connection.hpp), so the shadowed clock is reached from a plain
// connection running the statement the client sends first, word for word, and the function the
// client falls back to.
#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include <catch2/catch.hpp>
#include <pqxx/pqxx>

#include <statepact/postgres.hpp>
#include <statepact/statepact.hpp>

#include "../../src/postgres/statements.hpp"
#include "../support/run.hpp"
#include "postgres_admin.hpp"

namespace sp = statepact;
using namespace std::chrono_literals;

namespace {

struct Acquired {
  bool taken;  // false: refused, the holder kept
  std::string owner;
  long long token;
};

// Creates `shadow`.clock_timestamp(): the real clock, or 2 s behind it once its call counter
// (shadow.calls) passes shadow.step.after.
void make_shadow_clock(pqxx::connection& conn, const std::string& shadow) {
  pqxx::work w(conn);
  const std::string s = w.quote_name(shadow);
  w.exec("CREATE SCHEMA " + s);
  w.exec("CREATE SEQUENCE " + s + ".calls");
  w.exec("CREATE TABLE " + s + ".step (after bigint NOT NULL)");
  w.exec("INSERT INTO " + s + ".step VALUES (1000000000)");
  w.exec("CREATE FUNCTION " + s +
         ".clock_timestamp() RETURNS timestamptz LANGUAGE plpgsql VOLATILE AS $$ BEGIN "
         "IF nextval('" +
         s + ".calls') > (SELECT after FROM " + s +
         ".step) THEN RETURN pg_catalog.clock_timestamp() - interval '2 s'; END IF; "
         "RETURN pg_catalog.clock_timestamp(); END $$");
  w.commit();
}

// From the next call on, the shadowed clock steps back after `after` more calls.
void step_after(pqxx::connection& conn, const std::string& shadow, long long after) {
  pqxx::nontransaction n(conn);
  const std::string s = n.quote_name(shadow);
  n.exec("SELECT setval('" + s + ".calls', 1, false)");
  n.exec_params("UPDATE " + s + ".step SET after = $1", after);
}

// The plain statement: a row only when the lease was taken or extended.
Acquired by_statement(pqxx::connection& conn, const std::string& resource,
                      const std::string& owner) {
  pqxx::nontransaction n(conn);
  auto r = n.exec_prepared(sp::detail::pg::stmt::acquire_taken.name, resource, owner, 200);
  if (r.empty()) {
    auto held =
        n.exec_params1("SELECT owner, token FROM statepact_leases WHERE resource = $1", resource);
    return Acquired{false, held[0].as<std::string>(), held[1].as<long long>()};
  }
  return Acquired{true, r[0][1].as<std::string>(), r[0][2].as<long long>()};
}

Acquired by_function(pqxx::connection& conn, const std::string& resource,
                     const std::string& owner) {
  pqxx::nontransaction n(conn);
  auto r = n.exec_params1("SELECT o_status, o_owner, o_token FROM statepact_acquire($1, $2, 200)",
                          resource, owner);
  return Acquired{r[0].as<std::string>() == "ok", r[1].as<std::string>(), r[2].as<long long>()};
}

}  // namespace

TEST_CASE("a new owner gets a new token whatever the server clock does meanwhile",
          "[postgres][integration]") {
  const std::string schema = "clockstep_" + sp::test::run_suffix();
  const std::string shadow = "clockstep_shadow_" + sp::test::run_suffix();
  sp::test::run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::PostgresBackend b(ex, sp::test::postgres_test_url(), sp::PostgresOptions().schema(schema));
    co_await b.migrate();
  });
  sp::test::PostgresAdmin admin;
  pqxx::connection& conn = admin.connection();
  make_shadow_clock(conn, shadow);
  struct Drop {
    pqxx::connection& conn;
    std::string schema, shadow;
    ~Drop() {
      pqxx::nontransaction n(conn);
      n.exec("DROP SCHEMA IF EXISTS " + n.quote_name(schema) + " CASCADE");
      n.exec("DROP SCHEMA IF EXISTS " + n.quote_name(shadow) + " CASCADE");
    }
  } drop{conn, schema, shadow};
  {
    pqxx::nontransaction n(conn);
    n.exec("SET search_path = " + n.quote_name(shadow) + ", " + n.quote_name(schema) +
           ", pg_catalog");
  }
  conn.prepare(sp::detail::pg::stmt::acquire_taken.name, sp::detail::pg::stmt::acquire_taken.sql);

  for (const bool statement : {true, false}) {
    auto acquire = [&](const std::string& resource, const std::string& owner) {
      return statement ? by_statement(conn, resource, owner) : by_function(conn, resource, owner);
    };
    int taken = 0;
    for (long long after = 0; after <= 5; ++after) {
      INFO((statement ? "statement" : "function") << ", clock steps back after call " << after);
      const std::string resource = "r-" + std::to_string(statement) + "-" + std::to_string(after);
      step_after(conn, shadow, 1000000000);
      const Acquired a = acquire(resource, "A");
      REQUIRE(a.taken);
      const Acquired again = acquire(resource, "A");  // the live holder keeps its token
      REQUIRE(again.taken);
      REQUIRE(again.token == a.token);
      const long long a_token = a.token;
      std::this_thread::sleep_for(300ms);  // A's 200 ms lease has expired, by less than 2 s
      step_after(conn, shadow, after);
      const Acquired got = acquire(resource, "B");
      step_after(conn, shadow, 1000000000);
      if (got.taken) {
        ++taken;
        CHECK(got.owner == "B");
        CHECK(got.token > a_token);
      } else {  // the stepped clock showed A's lease live: A keeps it, token and all
        CHECK(got.owner == "A");
        CHECK(got.token == a_token);
      }
    }
    CHECK(taken > 0);  // an unstepped clock lets B take the expired lease
  }
}
