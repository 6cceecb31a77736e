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

#include <statepact/detail/lost_reply.hpp>
#include <statepact/errors.hpp>

#include "connection.hpp"
#include "sqlstate.hpp"

namespace statepact::detail::pg {

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

// The connection broke: see connection_lost_error().
[[noreturn]] inline void connection_lost(Link& link, const std::string& what, LostReply lost,
                                         Loss loss = Loss::disconnected) {
  link.drop();
  std::rethrow_exception(connection_lost_error(what, lost, loss));
}

// The error a SQLSTATE stands for (sqlstate_error()), the connection dropped where it must be.
[[noreturn]] inline void sql_state_failed(Link& link, const std::string& state,
                                          const std::string& text, LostReply lost) {
  if (drops_connection(state)) link.drop();
  std::rethrow_exception(sqlstate_error(state, text, lost));
}

[[noreturn]] inline void sql_failed(Link& link, const pqxx::sql_error& e, LostReply lost) {
  sql_state_failed(link, sqlstate_of(e), e.what(), lost);
}

// Inside a catch handler: rethrows the exception being handled as statepact's. statepact's own
// errors, UsageError and cancellation pass unchanged.
[[noreturn]] inline void rethrow_mapped(Link& link, LostReply lost) {
  try {
    throw;
  } catch (const Error&) {
    throw;
  } catch (const UsageError&) {
    throw;
  } catch (const std::system_error&) {
    throw;  // asio::error::operation_aborted: a cancelled lock wait
  } catch (const pqxx::in_doubt_error& e) {
    connection_lost(link, e.what(), LostReply::commit(lost.has_idempotency_key));
  } catch (const pqxx::broken_connection& e) {
    connection_lost(link, e.what(), lost);
  } catch (const pqxx::transaction_rollback& e) {
    sql_state_failed(link, sqlstate_of(e), e.what(), lost);
  } catch (const pqxx::sql_error& e) {
    sql_failed(link, e, lost);
  } catch (const std::exception& e) {
    // libpqxx usage or conversion errors, a JSON reply that does not parse: the reply was not
    // what statepact's functions send.
    if (lost.effect == Effect::commit)
      throw CommitUnknownError(
          fmt::format("unexpected reply from PostgreSQL after the commit was sent; it may or may "
                      "not have been applied: {}",
                      e.what()),
          lost.has_idempotency_key);
    throw Error(ErrorCode::backend_unavailable,
                fmt::format("unexpected failure talking to PostgreSQL: {}", e.what()));
  } catch (...) {
    if (lost.effect == Effect::commit)
      throw CommitUnknownError(
          "unexpected failure after the commit was sent; it may or may not have been applied",
          lost.has_idempotency_key);
    throw Error(ErrorCode::backend_unavailable, "unexpected failure talking to PostgreSQL");
  }
}

// Runs `f` on the pool connection, in autocommit, and maps its failures.
template <class F>
auto autocommit(Link& link, LostReply lost, F f) {
  for (bool again = false;; again = true) {
    std::optional<pqxx::nontransaction> n;
    try {
      n.emplace(link.connection());
    } catch (const pqxx::broken_connection& e) {
      // Dead before anything was sent: whatever the statement, nothing happened. One new
      // connection is worth a try; a second failure is the server being unreachable.
      if (again) connection_lost(link, e.what(), lost, Loss::not_sent);
      link.drop();
      continue;
    } catch (...) {
      rethrow_mapped(link, LostReply::in_transaction());  // nothing was sent
    }
    const bool may_resend = lost.resendable() && !again;
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
      if (!may_resend) connection_lost(link, e.what(), lost);
    } catch (const pqxx::sql_error& e) {
      if (!may_resend || !connection_class(e)) sql_failed(link, e, lost);
    } catch (...) {
      rethrow_mapped(link, lost);
    }
    link.drop();
  }
}

// Rolls back the session's transaction, if any; a failure means the connection is gone anyway.
inline void roll_back(Link& link) noexcept {
  if (!link.tx) return;
  try {
    link.tx->abort();
    link.tx.reset();
  } catch (...) {
    link.drop();
  }
}

// Runs `f(pqxx::work&)` in a pessimistic session's open transaction, and maps its failures as
// autocommit() does for the pool. Any failure of a statement aborts the transaction: it is rolled
// back here, so the session's later statements say it is gone, and nothing of it was applied.
template <class F>
auto in_transaction(Link& link, F f) {
  if (!link.tx)
    throw BackendUnavailableError(
        "the session's transaction is gone (its connection failed or a statement failed); "
        "nothing of it was committed: start a new session");
  try {
    return f(*link.tx);
  } catch (...) {
    roll_back(link);
    rethrow_mapped(link, LostReply::in_transaction());
  }
}

}  // namespace statepact::detail::pg
