// What a PostgreSQL failure means, by its SQLSTATE, without libpqxx: one map from a state (or a
// lost connection) to the library's error, so failures.hpp only finds the state and drops the
// connection where needed, and the map is unit-tested with no server.
#pragma once

#include <exception>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include <statepact/detail/lost_reply.hpp>
#include <statepact/errors.hpp>

namespace statepact::detail::pg {

// A serialization failure (40001): the server rolled the statement back and running the whole
// transaction again may succeed. No public class fits (ConflictError names a key and versions),
// so this one is internal; callers see a retryable statepact::Error with code conflict.
class SerializationConflict final : public Error {
 public:
  explicit SerializationConflict(const std::string& what) : Error(ErrorCode::conflict, what) {}
  bool retryable() const noexcept override { return true; }
};

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

// The connection broke (or the server ended it): with a statement in flight (`disconnected`), or
// before one was sent.
inline std::exception_ptr connection_lost_error(const std::string& what, LostReply lost,
                                                Loss loss = Loss::disconnected) {
  const std::string hint =
      what.find("idle-in-transaction") != std::string::npos
          ? " (the session stayed idle inside its transaction longer than "
            "idle_in_transaction_timeout; the server ended it and released its locks)"
          : "";
  return lost_reply_error("PostgreSQL", lost, loss,
                          fmt::format("connection lost ({}{})", what, hint));
}

// The error a SQLSTATE stands for; the server's text is kept in every message.
inline std::exception_ptr sqlstate_error(const std::string& state, const std::string& text,
                                         LostReply lost) {
  switch (kind_of(state)) {
    case Kind::conflict:
      return std::make_exception_ptr(SerializationConflict(fmt::format(
          "PostgreSQL could not serialize the transaction (SQLSTATE {}); nothing was applied, "
          "run it again: {}",
          state, text)));
    case Kind::deadlock:
      return std::make_exception_ptr(DeadlockError(fmt::format("PostgreSQL deadlock: {}", text)));
    case Kind::lock_timeout:
      return std::make_exception_ptr(
          LockTimeoutError(fmt::format("PostgreSQL lock timeout: {}", text)));
    case Kind::cancelled:
      // Cancelled statements are rolled back: nothing was applied.
      return std::make_exception_ptr(BackendUnavailableError(
          fmt::format("PostgreSQL statement timed out or was cancelled: {}", text)));
    case Kind::connection:
      return connection_lost_error(text, lost);
    case Kind::unavailable:
      return std::make_exception_ptr(BackendUnavailableError(fmt::format(
          "PostgreSQL cannot serve the statement now (SQLSTATE {}); nothing was applied: {}", state,
          text)));
    case Kind::configuration:
      // Needs an operator, not a retry.
      return std::make_exception_ptr(
          ConfigurationError(fmt::format("PostgreSQL refused the statement (SQLSTATE {}): {}; {}",
                                         state, text, configuration_hint(state))));
    case Kind::other:
      break;
  }
  return std::make_exception_ptr(Error(ErrorCode::backend_unavailable,
                                       fmt::format("PostgreSQL error {}; nothing was applied: {}",
                                                   state.empty() ? "(no SQLSTATE)" : state, text)));
}

// After these the connection is dropped: the session is gone, or (unavailable) a read-only server
// may be a demoted primary and the next connection may reach the new one.
inline bool drops_connection(std::string_view state) {
  const Kind k = kind_of(state);
  return k == Kind::connection || k == Kind::unavailable;
}

}  // namespace statepact::detail::pg
