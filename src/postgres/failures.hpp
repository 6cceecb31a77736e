// Turns every failure met on a PostgreSQL connection into statepact's errors, in one place. What
// can be said depends on whether the statement may have reached the server: before sending,
// nothing happened (retryable); an error reply means the server rolled the statement back; after
// a commit was sent and the connection broke, the outcome is unknown.
#pragma once

#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

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

// A serialization failure (40001): the server rolled the statement back and running the whole
// transaction again may succeed. No public class fits (ConflictError names a key and versions),
// so this one is internal; callers see a retryable statepact::Error with code conflict.
class SerializationConflict final : public Error {
 public:
  explicit SerializationConflict(const std::string& what) : Error(ErrorCode::conflict, what) {}
  bool retryable() const noexcept override { return true; }
};

// A failure that needs an operator, not a retry (authentication, privileges, a missing schema or
// database, a malformed connection string).
[[noreturn]] inline void configuration_failure(const std::string& what) {
  throw ConfigurationError(what);
}

// What a failure means, whatever form it came in.
enum class Kind {
  conflict,       // 40001, 40000: run the transaction again
  deadlock,       // 40P01
  lock_timeout,   // 55P03
  cancelled,      // 57014: statement_timeout or a cancel request; rolled back
  connection,     // 08xxx, 57P0x, 25P03, 40003: the session is gone, maybe mid-statement
  unavailable,    // 53xxx (out of resources), 25006 (a read-only server): retry later
  configuration,  // 28xxx, 42xxx, 3D000, 3F000: what to fix is in the message
  other,
};

inline Kind kind_of(std::string_view state) {
  auto starts = [&](std::string_view p) { return state.substr(0, p.size()) == p; };
  if (state == "40001" || state == "40000") return Kind::conflict;
  if (state == "40P01") return Kind::deadlock;
  if (state == "55P03") return Kind::lock_timeout;
  if (state == "57014") return Kind::cancelled;
  if (starts("08") || starts("57P") || state == "25P03" || state == "40003")
    return Kind::connection;
  if (starts("53") || state == "25006") return Kind::unavailable;
  if (starts("28") || starts("42") || state == "3D000" || state == "3F000")
    return Kind::configuration;
  return Kind::other;
}

// libpqxx 6 throws the transaction-rollback class (40xxx) as its own exceptions, without a
// SQLSTATE and not as sql_error.
inline std::string sqlstate_of(const pqxx::transaction_rollback& e) {
  if (dynamic_cast<const pqxx::serialization_failure*>(&e)) return "40001";
  if (dynamic_cast<const pqxx::deadlock_detected*>(&e)) return "40P01";
  if (dynamic_cast<const pqxx::statement_completion_unknown*>(&e)) return "40003";
  return "40000";
}

// libpqxx 6 leaves sqlstate() empty on some of its subclasses of sql_error: their type says it.
inline std::string sqlstate_of(const pqxx::sql_error& e) {
  if (!e.sqlstate().empty()) return e.sqlstate();
  if (dynamic_cast<const pqxx::insufficient_privilege*>(&e)) return "42501";
  if (dynamic_cast<const pqxx::undefined_table*>(&e)) return "42P01";
  if (dynamic_cast<const pqxx::undefined_function*>(&e)) return "42883";
  if (dynamic_cast<const pqxx::undefined_column*>(&e)) return "42703";
  if (dynamic_cast<const pqxx::syntax_error*>(&e)) return "42601";
  if (dynamic_cast<const pqxx::disk_full*>(&e)) return "53100";
  if (dynamic_cast<const pqxx::out_of_memory*>(&e)) return "53200";
  if (dynamic_cast<const pqxx::insufficient_resources*>(&e)) return "53000";
  return "";
}

// A connection exception (08) or operator intervention (57P01 terminated, 57P02 crash, 57P03
// cannot connect now) can still look alive to the poll before the statement, so the first
// statement after it fails. For a read that is no reason to fail the caller: it goes once more on
// a new connection.
inline bool connection_class(const pqxx::sql_error& e) {
  return kind_of(sqlstate_of(e)) == Kind::connection;
}

// The connection broke (or the server ended it) while a statement was in flight.
[[noreturn]] inline void connection_lost(Link& link, const std::string& what, Outcome outcome,
                                         bool has_idempotency_key) {
  link.drop();
  const std::string hint =
      what.find("idle-in-transaction") != std::string::npos
          ? " (the session stayed idle inside its transaction longer than "
            "idle_in_transaction_timeout; the server ended it and released its locks)"
          : "";
  if (outcome == Outcome::commit_unknown)
    throw CommitUnknownError(
        fmt::format("connection to PostgreSQL lost after the commit was sent; it may or may not "
                    "have been applied: {}{}",
                    what, hint),
        has_idempotency_key);
  throw BackendUnavailableError(
      fmt::format("connection to PostgreSQL lost; nothing was applied: {}{}", what, hint));
}

inline std::string configuration_hint(std::string_view state) {
  if (state.substr(0, 2) == "28")
    return "authentication failed: check the user name and password of the connection string "
           "and the server's pg_hba.conf";
  if (state == "42501")
    return "permission denied: grant the role what the message names (the migration needs "
           "CREATE on the database or on the schema; every operation needs USAGE on the schema "
           "and the right to use statepact's tables and functions)";
  if (state == "3D000") return "the database does not exist: check the connection string";
  if (state == "42P01" || state == "42883" || state == "3F000" || state == "42704")
    return "statepact's tables or functions are missing from the schema (dropped after the "
           "migration, or PostgresOptions::schema names another schema): restart the backend so "
           "it migrates the schema again, or fix the option";
  return "the server refused statepact's SQL: check the server version (15 or later) and the "
         "role's settings";
}

// The error a SQLSTATE stands for; the server's text is kept in every message.
[[noreturn]] inline void sql_state_failed(Link& link, const std::string& state,
                                          const std::string& text, Outcome outcome,
                                          bool has_idempotency_key) {
  switch (kind_of(state)) {
    case Kind::conflict:
      throw SerializationConflict(fmt::format(
          "PostgreSQL could not serialize the transaction (SQLSTATE {}); nothing was applied, "
          "run it again: {}",
          state, text));
    case Kind::deadlock:
      throw DeadlockError(fmt::format("PostgreSQL deadlock: {}", text));
    case Kind::lock_timeout:
      throw LockTimeoutError(fmt::format("PostgreSQL lock timeout: {}", text));
    case Kind::cancelled:
      // Cancelled statements are rolled back: nothing was applied.
      throw BackendUnavailableError(
          fmt::format("PostgreSQL statement timed out or was cancelled: {}", text));
    case Kind::connection:
      connection_lost(link, text, outcome, has_idempotency_key);
    case Kind::unavailable:
      // A read-only server may be a demoted primary: the next connection may reach the new one.
      link.drop();
      throw BackendUnavailableError(fmt::format(
          "PostgreSQL cannot serve the statement now (SQLSTATE {}); nothing was applied: {}", state,
          text));
    case Kind::configuration:
      configuration_failure(fmt::format("PostgreSQL refused the statement (SQLSTATE {}): {}; {}",
                                        state, text, configuration_hint(state)));
    case Kind::other:
      break;
  }
  throw Error(ErrorCode::backend_unavailable,
              fmt::format("PostgreSQL error {}; nothing was applied: {}",
                          state.empty() ? "(no SQLSTATE)" : state, text));
}

[[noreturn]] inline void sql_failed(Link& link, const pqxx::sql_error& e, Outcome outcome,
                                    bool has_idempotency_key) {
  sql_state_failed(link, sqlstate_of(e), e.what(), outcome, has_idempotency_key);
}

// Inside a catch handler: rethrows the exception being handled as statepact's. statepact's own
// errors, UsageError and cancellation pass unchanged.
[[noreturn]] inline void rethrow_mapped(Link& link, Outcome outcome, bool has_idempotency_key) {
  try {
    throw;
  } catch (const Error&) {
    throw;
  } catch (const UsageError&) {
    throw;
  } catch (const std::system_error&) {
    throw;  // asio::error::operation_aborted: a cancelled lock wait
  } catch (const pqxx::in_doubt_error& e) {
    connection_lost(link, e.what(), Outcome::commit_unknown, has_idempotency_key);
  } catch (const pqxx::broken_connection& e) {
    connection_lost(link, e.what(), outcome, has_idempotency_key);
  } catch (const pqxx::transaction_rollback& e) {
    sql_state_failed(link, sqlstate_of(e), e.what(), outcome, has_idempotency_key);
  } catch (const pqxx::sql_error& e) {
    sql_failed(link, e, outcome, has_idempotency_key);
  } catch (const std::exception& e) {
    // libpqxx usage or conversion errors, a JSON reply that does not parse: the reply was not
    // what statepact's functions send.
    if (outcome == Outcome::commit_unknown)
      throw CommitUnknownError(
          fmt::format("unexpected reply from PostgreSQL after the commit was sent; it may or may "
                      "not have been applied: {}",
                      e.what()),
          has_idempotency_key);
    throw Error(ErrorCode::backend_unavailable,
                fmt::format("unexpected failure talking to PostgreSQL: {}", e.what()));
  } catch (...) {
    if (outcome == Outcome::commit_unknown)
      throw CommitUnknownError(
          "unexpected failure after the commit was sent; it may or may not have been applied",
          has_idempotency_key);
    throw Error(ErrorCode::backend_unavailable, "unexpected failure talking to PostgreSQL");
  }
}

// Runs `f` on the pool connection, in autocommit, and maps its failures.
template <class F>
auto autocommit(Link& link, Outcome outcome, bool has_idempotency_key, F f) {
  for (bool again = false;; again = true) {
    std::optional<pqxx::nontransaction> n;
    try {
      n.emplace(link.connection());
    } catch (const pqxx::broken_connection& e) {
      // Dead before anything was sent: whatever the statement, nothing happened. One new
      // connection is worth a try; a second failure is the server being unreachable.
      if (again) connection_lost(link, e.what(), Outcome::nothing_applied, has_idempotency_key);
      link.drop();
      continue;
    } catch (...) {
      rethrow_mapped(link, Outcome::nothing_applied, has_idempotency_key);
    }
    const bool may_resend = outcome == Outcome::read_only && !again;
    std::exception_ptr failure;
    try {
      return f(*n);
    } catch (...) {
      failure = std::current_exception();
    }
    // The transaction refers to the connection: it must end before the mapping below drops that
    // connection (its destructor would touch a freed connection and crash the process).
    n.reset();
    try {
      std::rethrow_exception(failure);
    } catch (const pqxx::broken_connection& e) {
      if (!may_resend) connection_lost(link, e.what(), outcome, has_idempotency_key);
    } catch (const pqxx::sql_error& e) {
      if (!may_resend || !connection_class(e)) sql_failed(link, e, outcome, has_idempotency_key);
    } catch (...) {
      rethrow_mapped(link, outcome, has_idempotency_key);
    }
    link.drop();
  }
}

}  // namespace statepact::detail::pg
