// The conformance fixture for PostgresBackend against the server named by
// STATEPACT_TEST_POSTGRES_URL (scripts/servers/postgres.sh starts one).
#pragma once

#include <statepact/postgres.hpp>

#include "server_fixture.hpp"

namespace statepact::test {

inline std::string postgres_test_url() {
  return server_url("STATEPACT_TEST_POSTGRES_URL",
                    "start a server with scripts/servers/postgres.sh (postgres_start) or point it "
                    "at one, e.g. postgresql://postgres@127.0.0.1:55432/db");
}

struct PostgresFixture : ServerFixtureBase {
  using backend_type = PostgresBackend;
  static constexpr const char* name = "postgres";

  explicit PostgresFixture(asio::any_io_executor ex,
                           milliseconds retention = std::chrono::hours(24))
      : backend_(ex, postgres_test_url(),
                 // A short deadlock check, so the request that closes a wait cycle is the one
                 // refused (as in every backend), rather than whichever waiter checks first.
                 PostgresOptions().idempotency_retention(retention).deadlock_timeout(10ms)) {}

  backend_type& backend() { return backend_; }

  PostgresBackend backend_;
};

}  // namespace statepact::test
