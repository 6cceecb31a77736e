// One error contract: whatever the server or libpq answers, the caller gets a statepact::Error
// whose type and retryable() follow the SQLSTATE's meaning, with the server's text kept, and no
// message ever shows the connection's password.
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <pqxx/pqxx>

#include <statepact/postgres.hpp>
#include <statepact/statepact.hpp>

#include "../support/run.hpp"
#include "postgres_admin.hpp"

namespace sp = statepact;
using namespace std::chrono_literals;

namespace {

// The test URL (postgresql://user@host:port/db) with its user part replaced.
std::string with_userinfo(const std::string& url, const std::string& userinfo) {
  const auto start = url.find("://") + 3;
  return url.substr(0, start) + userinfo + url.substr(url.find('@'));
}

std::string with_database(const std::string& url, const std::string& db) {
  return url.substr(0, url.rfind('/') + 1) + db;
}

// What the first operation of a backend on `url` throws.
struct Failure {
  bool is_statepact = false;
  bool retryable = false;
  sp::ErrorCode code{};
  std::string type;
  std::string what;
};

template <class Op>
Failure first_failure(const std::string& url, sp::PostgresOptions options, Op op) {
  Failure f;
  try {
    sp::test::run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
      sp::PostgresBackend b(ex, url, options);
      co_await op(b);
    });
    f.what = "(nothing thrown)";
  } catch (const sp::Error& e) {
    f.is_statepact = true;
    f.retryable = e.retryable();
    f.code = e.code();
    f.type = typeid(e).name();
    f.what = e.what();
  } catch (const std::exception& e) {
    f.type = typeid(e).name();
    f.what = e.what();
  }
  return f;
}

asio::awaitable<void> touch(sp::PostgresBackend& b) {
  co_await b.current_fence("anything");
}

struct Injected {
  std::string sqlstate;
  sp::ErrorCode code;
  bool retryable;
  bool commit_unknown = false;
};

std::vector<Injected> injected_failures() {
  return {
      {"40001", sp::ErrorCode::conflict, true},
      {"40P01", sp::ErrorCode::deadlock, true},
      {"55P03", sp::ErrorCode::lock_timeout, true},
      {"53100", sp::ErrorCode::backend_unavailable, true},
      {"25006", sp::ErrorCode::backend_unavailable, true},
      {"57P01", sp::ErrorCode::commit_unknown, false, true},
      {"42501", sp::ErrorCode::configuration, false},
      {"P0001", sp::ErrorCode::backend_unavailable, false},
  };
}

}  // namespace

TEST_CASE("server errors map to statepact errors by SQLSTATE, keeping the server's text",
          "[postgres][integration]") {
  const std::string schema = "errors_" + sp::test::run_suffix();
  const std::string url = sp::test::postgres_test_url();
  const auto options = sp::PostgresOptions().schema(schema).pool_size(1);
  sp::test::PostgresAdmin admin;
  struct Drop {
    sp::test::PostgresAdmin& admin;
    std::string schema;
    ~Drop() {
      pqxx::nontransaction n(admin.connection());
      n.exec("DROP SCHEMA IF EXISTS " + n.quote_name(schema) + " CASCADE");
    }
  } drop{admin, schema};
  sp::test::run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::PostgresBackend b(ex, url, options);
    co_await b.register_resource("r");
  });
  {
    // Every write of a key raises the SQLSTATE in `inject`, if any (not the placeholder row a
    // pessimistic lock inserts: the commit is what fails).
    pqxx::work w(admin.connection());
    const std::string s = w.quote_name(schema);
    w.exec("CREATE TABLE " + s + ".inject (sqlstate text)");
    w.exec("CREATE FUNCTION " + s +
           ".inject_failure() RETURNS trigger LANGUAGE plpgsql AS $$ DECLARE c text; BEGIN "
           "SELECT sqlstate INTO c FROM " +
           s +
           ".inject; IF c IS NOT NULL AND NEW.version > 0 THEN RAISE EXCEPTION 'injected failure "
           "%', c USING "
           "ERRCODE = c; END IF; RETURN NEW; END $$");
    w.exec("CREATE TRIGGER inject BEFORE INSERT OR UPDATE ON " + s +
           ".statepact_keys FOR EACH ROW EXECUTE FUNCTION " + s + ".inject_failure()");
    w.commit();
  }
  auto inject = [&](const std::string& state) {
    pqxx::work w(admin.connection());
    w.exec("DELETE FROM " + w.quote_name(schema) + ".inject");
    if (!state.empty())
      w.exec_params("INSERT INTO " + w.quote_name(schema) + ".inject VALUES ($1)", state);
    w.commit();
  };
  for (const auto isolation : {sp::Isolation::optimistic, sp::Isolation::pessimistic}) {
    for (const auto& c : injected_failures()) {
      // Pessimistic commits run inside the session's transaction: a lost connection there
      // means nothing was applied.
      const bool unknown = c.commit_unknown && isolation == sp::Isolation::optimistic;
      const auto code = c.commit_unknown && !unknown ? sp::ErrorCode::backend_unavailable : c.code;
      const bool retryable = c.commit_unknown && !unknown ? true : c.retryable;
      INFO("SQLSTATE " << c.sqlstate
                       << (isolation == sp::Isolation::pessimistic ? " (pessimistic)"
                                                                   : " (optimistic)"));
      inject(c.sqlstate);
      auto f = first_failure(url, options, [&](sp::PostgresBackend& b) -> asio::awaitable<void> {
        sp::Manager<sp::PostgresBackend> m(b);
        auto s = co_await m.session(sp::SessionOptions("agent").resource("r").isolation(isolation));
        co_await s.write("k", 1);
        co_await s.commit();
      });
      INFO(f.type << ": " << f.what);
      CHECK(f.is_statepact);
      CHECK(f.code == code);
      CHECK(f.retryable == retryable);
      CHECK(f.what.find("injected failure " + c.sqlstate) != std::string::npos);
    }
  }
  // Nothing was applied, and a session after the failures works on the same connection.
  inject("");
  sp::test::run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    sp::PostgresBackend b(ex, url, options);
    sp::Manager<sp::PostgresBackend> m(b);
    auto e = co_await b.read("r", "k");
    CHECK_FALSE(e.value);
    auto s = co_await m.session(
        sp::SessionOptions("agent").resource("r").isolation(sp::Isolation::pessimistic));
    co_await s.write("k", 2);
    co_await s.commit();
    e = co_await b.read("r", "k");
    CHECK(e.value == sp::Value(2));
  });
}

TEST_CASE("connection failures say what to fix and never show the password",
          "[postgres][integration]") {
  const std::string url = sp::test::postgres_test_url();
  const std::string secret = "s3cr3t-Pw";
  const auto quick = sp::PostgresOptions().connect_timeout(2s).pool_size(1);

  // A role the server does not know (SQLSTATE 28000): not retryable, names the role.
  auto role = first_failure(with_userinfo(url, "nobody_" + sp::test::run_suffix() + ":" + secret),
                            quick, touch);
  INFO(role.what);
  CHECK(role.is_statepact);
  CHECK_FALSE(role.retryable);
  CHECK(role.what.find("nobody_") != std::string::npos);
  CHECK(role.what.find("pg_hba.conf") != std::string::npos);
  CHECK(role.what.find(secret) == std::string::npos);
  CHECK(role.what.find("***") != std::string::npos);  // the target, password removed

  // A database that does not exist: not retryable.
  auto db = first_failure(with_database(with_userinfo(url, "postgres:" + secret),
                                        "no_such_db_" + sp::test::run_suffix()),
                          quick, touch);
  INFO(db.what);
  CHECK(db.is_statepact);
  CHECK_FALSE(db.retryable);
  CHECK(db.what.find("no_such_db_") != std::string::npos);
  CHECK(db.what.find(secret) == std::string::npos);

  // A malformed URL: libpq quotes the bad part, the password here, in its message.
  auto malformed = first_failure(with_userinfo(url, "postgres:" + secret + "%zz"), quick, touch);
  INFO(malformed.what);
  CHECK(malformed.is_statepact);
  CHECK_FALSE(malformed.retryable);
  CHECK(malformed.what.find("s3cr3t") == std::string::npos);

  // Nobody listening: retryable, and the keyword form's quoted password is removed too.
  auto refused = first_failure(
      "host=127.0.0.1 port=1 dbname=statepact_test user=postgres password='" + secret + " x'",
      quick, touch);
  INFO(refused.what);
  CHECK(refused.is_statepact);
  CHECK(refused.retryable);
  CHECK(refused.what.find("s3cr3t") == std::string::npos);
}

TEST_CASE("a role that may not create the schema gets a non-retryable error saying so",
          "[postgres][integration]") {
  const std::string role = "sp_noperm_" + sp::test::run_suffix();
  sp::test::PostgresAdmin admin;
  {
    pqxx::nontransaction n(admin.connection());
    n.exec("CREATE ROLE " + n.quote_name(role) + " LOGIN");
  }
  struct Drop {
    sp::test::PostgresAdmin& admin;
    std::string role;
    ~Drop() {
      pqxx::nontransaction n(admin.connection());
      n.exec("DROP ROLE IF EXISTS " + n.quote_name(role));
    }
  } drop{admin, role};
  auto f = first_failure(with_userinfo(sp::test::postgres_test_url(), role),
                         sp::PostgresOptions().schema("noperm_" + sp::test::run_suffix()), touch);
  INFO(f.what);
  CHECK(f.is_statepact);
  CHECK_FALSE(f.retryable);
  CHECK(f.what.find("permission denied") != std::string::npos);
  CHECK(f.what.find("CREATE") != std::string::npos);
}
