// Turns libpqxx failures into statepact's errors. What can be said depends on whether the
// statement may have reached the server: before sending, nothing happened (retryable); after a
// commit was sent and the connection broke, the outcome is unknown.
#pragma once

#include <optional>
#include <string>

#include <pqxx/pqxx>

#include <fmt/format.h>

#include <statepact/errors.hpp>

#include "connection.hpp"

namespace statepact::detail::pg {

enum class Outcome {
  read_only,        // changes nothing: safe to send again on a fresh connection
  nothing_applied,  // a lease operation, or a statement inside an open transaction
  commit_unknown,   // an autocommitted commit: the server may have applied it
};

// A connection the server ended (pg_terminate_backend, a restart) can still look alive to the
// poll before the statement, so the first statement after it fails. For a read that is no reason
// to fail the caller: it goes once more on a new connection.
inline bool connection_class(const pqxx::sql_error& e) {
  const std::string& state = e.sqlstate();
  return state.rfind("08", 0) == 0 || state.rfind("57P", 0) == 0;
}

// The connection broke (or the server ended it) while a statement was in flight.
[[noreturn]] inline void connection_lost(Link& link, const char* what, Outcome outcome,
                                         bool has_idempotency_key) {
  link.drop();
  if (outcome == Outcome::commit_unknown)
    throw CommitUnknownError(
        fmt::format("connection to PostgreSQL lost after the commit was sent; it may or may not "
                    "have been applied: {}",
                    what),
        has_idempotency_key);
  throw BackendUnavailableError(fmt::format("connection to PostgreSQL lost: {}", what));
}

[[noreturn]] inline void sql_failed(Link& link, const pqxx::sql_error& e, Outcome outcome,
                                    bool has_idempotency_key) {
  const std::string& state = e.sqlstate();
  if (state == "40P01") throw DeadlockError(fmt::format("PostgreSQL deadlock: {}", e.what()));
  if (state == "55P03")
    throw LockTimeoutError(fmt::format("PostgreSQL lock timeout: {}", e.what()));
  // A statement cancelled by statement_timeout was rolled back: nothing was applied.
  if (state == "57014")
    throw BackendUnavailableError(
        fmt::format("PostgreSQL statement timed out or was cancelled: {}", e.what()));
  // Connection exceptions (08) and operator intervention (57P01 terminated, 57P02 crash, 57P03
  // cannot connect now): the session is gone with the statement.
  if (connection_class(e)) connection_lost(link, e.what(), outcome, has_idempotency_key);
  throw std::runtime_error(fmt::format("PostgreSQL error {}: {}", state, e.what()));
}

// Runs `f` on the pool connection, in autocommit, and maps its failures.
template <class F>
auto autocommit(Link& link, Outcome outcome, bool has_idempotency_key, F f) {
  for (bool again = false;; again = true) {
    pqxx::connection& conn = link.connection();
    std::optional<pqxx::nontransaction> n;
    try {
      n.emplace(conn);
    } catch (const pqxx::broken_connection& e) {
      // Dead before anything was sent: whatever the statement, nothing happened. One new
      // connection is worth a try; a second failure is the server being unreachable.
      if (again) connection_lost(link, e.what(), Outcome::nothing_applied, has_idempotency_key);
      link.drop();
      continue;
    }
    const bool may_resend = outcome == Outcome::read_only && !again;
    try {
      return f(*n);
    } catch (const pqxx::broken_connection& e) {
      if (!may_resend) connection_lost(link, e.what(), outcome, has_idempotency_key);
    } catch (const pqxx::sql_error& e) {
      if (!may_resend || !connection_class(e)) sql_failed(link, e, outcome, has_idempotency_key);
    } catch (const pqxx::in_doubt_error& e) {
      connection_lost(link, e.what(), outcome, has_idempotency_key);
    }
    n.reset();
    link.drop();
  }
}

}  // namespace statepact::detail::pg
