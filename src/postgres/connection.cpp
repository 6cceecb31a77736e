#include "connection.hpp"

#include <poll.h>

#include <algorithm>
#include <cctype>
#include <string_view>

#include <fmt/format.h>

#include <statepact/errors.hpp>

#include "failures.hpp"
#include "migrate.hpp"
#include "statements.hpp"

namespace statepact::detail::pg {

namespace {

// Messages libpq writes when the connection string itself is wrong or the server refuses the
// role: retrying cannot help. Anything else (refused, unreachable, too many clients, starting up)
// may pass.
bool refused_for_good(const std::string& what) {
  static constexpr std::string_view patterns[] = {
      "authentication failed",   "no pg_hba.conf entry",  "does not exist",
      "permission denied",       "no password supplied",  "invalid connection option",
      "missing \"=\"",           "invalid URI",           "unterminated quoted string",
      "invalid percent-encoded", "invalid integer value", "invalid port number",
      "invalid sslmode"};
  return std::any_of(std::begin(patterns), std::end(patterns),
                     [&](std::string_view p) { return what.find(p) != std::string::npos; });
}

}  // namespace

void Shared::ensure_migrated(pqxx::connection& conn) {
  std::lock_guard guard(mu_);
  if (migrated_) return;
  migrate(conn, settings_.schema);
  migrated_ = true;
}

pqxx::connection& Link::connection() {
  if (conn_ && looks_dead()) drop();
  if (!conn_) connect();
  return *conn_;
}

void Link::drop() noexcept {
  tx.reset();
  try {
    conn_.reset();
  } catch (...) {
  }
}

bool Link::looks_dead() const {
  if (!conn_->is_open()) return true;
  pollfd p{conn_->sock(), POLLIN, 0};
  if (p.fd < 0) return true;
  return ::poll(&p, 1, 0) != 0;
}

std::vector<std::string> setup_params(const Settings& s) {
  return {std::to_string(s.statement_timeout.count()), std::to_string(s.lock_timeout.count()),
          s.schema, s.application_name, std::to_string(s.idle_in_transaction_timeout.count())};
}

void connect_failed(const Settings& s, const std::string& libpq_text) {
  const std::string what = redact(libpq_text, s.secrets);
  if (refused_for_good(what))
    throw ConfigurationError(
        fmt::format("cannot connect to PostgreSQL at {}: {}; check the connection string, the "
                    "role and its password, and the server's pg_hba.conf",
                    s.target, what));
  throw BackendUnavailableError(
      fmt::format("cannot connect to PostgreSQL at {}: {}", s.target, what));
}

void Link::connect() {
  const Settings& s = shared_->settings();
  std::string step = "setting up the connection";
  try {
    auto conn = std::make_unique<pqxx::connection>(s.conninfo);
    {
      pqxx::nontransaction setup(*conn);
      const auto p = setup_params(s);
      setup.exec_params(setup_sql, p[0], p[1], p[2], p[3], p[4]);
    }
    step = fmt::format("migrating schema '{}'", s.schema);
    shared_->ensure_migrated(*conn);
    step = "preparing statements";
    for (const auto& st : stmt::all) conn->prepare(st.name, st.sql);
    conn_ = std::move(conn);
  } catch (const pqxx::broken_connection& e) {
    connect_failed(s, e.what());
  } catch (const pqxx::sql_error& e) {
    sql_state_failed(*this, sqlstate_of(e), fmt::format("{}: {}", step, e.what()),
                     LostReply::in_transaction());
  } catch (const pqxx::transaction_rollback& e) {
    sql_state_failed(*this, sqlstate_of(e), fmt::format("{}: {}", step, e.what()),
                     LostReply::in_transaction());
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw BackendUnavailableError(
        fmt::format("cannot set up a PostgreSQL connection to {} ({}): {}", s.target, step,
                    redact(e.what(), s.secrets)));
  }
}

}  // namespace statepact::detail::pg
