#include "connection.hpp"

#include <poll.h>

#include <fmt/format.h>

#include <statepact/errors.hpp>

#include "migrate.hpp"
#include "statements.hpp"

namespace statepact::detail::pg {

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

void Link::connect() {
  const Settings& s = shared_->settings();
  try {
    auto conn = std::make_unique<pqxx::connection>(s.conninfo);
    {
      // Parameters rather than quoting on the client: names never become SQL text.
      pqxx::nontransaction setup(*conn);
      setup.exec_params(
          "SELECT set_config('statement_timeout', $1, false), "
          "set_config('lock_timeout', $2, false), "
          "set_config('search_path', quote_ident($3), false), "
          "set_config('client_min_messages', 'warning', false), "
          "set_config('application_name', $4, false)",
          std::to_string(s.statement_timeout.count()), std::to_string(s.lock_timeout.count()),
          s.schema, s.application_name);
    }
    shared_->ensure_migrated(*conn);
    for (const auto& st : stmt::all) conn->prepare(st.name, st.sql);
    conn_ = std::move(conn);
  } catch (const pqxx::broken_connection& e) {
    throw BackendUnavailableError(fmt::format("cannot connect to PostgreSQL: {}", e.what()));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw BackendUnavailableError(
        fmt::format("cannot set up a PostgreSQL connection: {}", e.what()));
  }
}

}  // namespace statepact::detail::pg
