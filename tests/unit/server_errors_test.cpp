// The two servers' error maps, with no server: a Redis error reply (of a command or of a new
// connection's setup) and a PostgreSQL SQLSTATE each become the library's error by meaning.
#include <catch2/catch.hpp>

#include <exception>
#include <string>

#include "../postgres/sqlstate.hpp"
#include "server_errors.hpp"  // src/redis

#include "../support/caught.hpp"

namespace sp = statepact;
namespace d = statepact::detail;
namespace pg = statepact::detail::pg;

using sp::test::caught;

TEST_CASE("redis errors: busy for now, configuration, anything else", "[server_errors][redis]") {
  for (const char* reply : {"LOADING Redis is loading", "BUSY script", "READONLY replica",
                            "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "OOM command not allowed"}) {
    INFO(reply);
    const auto m = caught(d::redis_server_error("the acquire script", reply));
    CHECK(m.code == sp::ErrorCode::backend_unavailable);
    CHECK(m.retryable);
    CHECK(m.has("did not run"));
  }
  const auto noauth = caught(d::redis_server_error("EVALSHA", "NOAUTH Authentication required"));
  CHECK(noauth.configuration);
  CHECK_FALSE(noauth.retryable);
  CHECK(noauth.has("put it in the URL"));
  CHECK(caught(d::redis_server_error("EVALSHA", "WRONGPASS invalid")).configuration);
  CHECK(caught(d::redis_server_error("EVALSHA", "NOPERM no")).has("ACL"));
  const auto other = caught(d::redis_server_error("the commit script", "ERR user_script:1"));
  CHECK_FALSE(other.configuration);
  CHECK_FALSE(other.retryable);
  CHECK(other.has("ERR user_script:1"));
}

TEST_CASE("redis errors: a new connection's setup steps", "[server_errors][redis]") {
  d::RedisUrl url;
  url.host = "db.example";
  url.port = 6390;
  url.db = 7;
  url.password = "s3cret";
  const auto select =
      caught(d::setup_failure(d::setup_select, "ERR DB index is out of range", url));
  CHECK(select.configuration);
  CHECK(select.has("no database 7"));
  CHECK_FALSE(select.has("s3cret"));
  CHECK(caught(d::setup_failure(d::setup_auth, "WRONGPASS", url)).has("user name and password"));
  // A server still loading refuses for now: retryable, not configuration.
  const auto loading = caught(d::setup_failure(d::setup_auth, "LOADING", url));
  CHECK(loading.retryable);
  CHECK_FALSE(loading.configuration);

  CHECK_FALSE(d::eviction_verdict("# Memory\r\nmaxmemory_policy:noeviction\r\n", url));
  const auto lru = caught(d::eviction_verdict("maxmemory_policy:allkeys-lru\r\n", url));
  CHECK(lru.configuration);
  CHECK(lru.has("'allkeys-lru'"));
  CHECK(lru.has("db.example:6390"));
  CHECK(caught(d::eviction_verdict("", url)).has("'unknown'"));
}

TEST_CASE("postgres errors: each SQLSTATE class by meaning", "[server_errors][postgres]") {
  const auto lost = d::LostReply::write();
  CHECK(caught(pg::sqlstate_error("40001", "could not serialize", lost)).code ==
        sp::ErrorCode::conflict);
  CHECK(caught(pg::sqlstate_error("40001", "x", lost)).retryable);
  CHECK_THROWS_AS(std::rethrow_exception(pg::sqlstate_error("40P01", "x", lost)),
                  sp::DeadlockError);
  CHECK_THROWS_AS(std::rethrow_exception(pg::sqlstate_error("55P03", "x", lost)),
                  sp::LockTimeoutError);
  CHECK(caught(pg::sqlstate_error("57014", "canceling", lost)).has("timed out or was cancelled"));
  const auto readonly = caught(pg::sqlstate_error("25006", "read-only transaction", lost));
  CHECK(readonly.retryable);
  CHECK(pg::drops_connection("25006"));
  const auto denied = caught(pg::sqlstate_error("42501", "permission denied", lost));
  CHECK(denied.configuration);
  CHECK(denied.has("grant the role"));
  CHECK(caught(pg::sqlstate_error("28P01", "password", lost)).has("pg_hba.conf"));
  CHECK(caught(pg::sqlstate_error("", "odd", lost)).has("(no SQLSTATE)"));
  CHECK_FALSE(pg::drops_connection("40001"));
}

TEST_CASE("postgres errors: a connection ended under a statement", "[server_errors][postgres]") {
  CHECK(pg::drops_connection("57P01"));
  CHECK(pg::drops_connection("08006"));
  // What it means depends on the statement: a commit may have been applied.
  CHECK_THROWS_AS(
      std::rethrow_exception(pg::sqlstate_error("57P01", "terminated", d::LostReply::commit(true))),
      sp::CommitUnknownError);
  const auto idle = caught(pg::connection_lost_error(
      "terminating connection due to idle-in-transaction timeout", d::LostReply::in_transaction()));
  CHECK(idle.has("idle_in_transaction_timeout"));
  CHECK(idle.has("nothing was applied"));
  CHECK(caught(pg::connection_lost_error("gone", d::LostReply::read(), d::Loss::not_sent))
            .has("nothing was sent"));
}
