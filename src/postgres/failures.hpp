// Turns libpqxx failures into statepact's errors. What can be said depends on whether the
// statement may have reached the server: before sending, nothing happened (retryable); after a
// commit was sent and the connection broke, the outcome is unknown.
#pragma once

#include <string>

#include <pqxx/pqxx>

#include <fmt/format.h>

#include <statepact/errors.hpp>

#include "connection.hpp"

namespace statepact::detail::pg {

enum class Outcome {
  nothing_applied,  // a read, a lease operation, or a statement inside an open transaction
  commit_unknown,   // an autocommitted commit: the server may have applied it
};

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
  if (state.rfind("08", 0) == 0 || state.rfind("57P", 0) == 0)
    connection_lost(link, e.what(), outcome, has_idempotency_key);
  throw std::runtime_error(fmt::format("PostgreSQL error {}: {}", state, e.what()));
}

// Runs `f` on the pool connection, in autocommit, and maps its failures.
template <class F>
auto autocommit(Link& link, Outcome outcome, bool has_idempotency_key, F f) {
  pqxx::connection& conn = link.connection();
  try {
    pqxx::nontransaction n(conn);
    return f(n);
  } catch (const pqxx::broken_connection& e) {
    connection_lost(link, e.what(), outcome, has_idempotency_key);
  } catch (const pqxx::sql_error& e) {
    sql_failed(link, e, outcome, has_idempotency_key);
  } catch (const pqxx::in_doubt_error& e) {
    connection_lost(link, e.what(), outcome, has_idempotency_key);
  }
}

}  // namespace statepact::detail::pg
