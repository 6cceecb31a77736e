// One thread's PostgreSQL connection: made on first use, set up (timeouts, search_path, prepared
// statements, the schema migration once per backend) and replaced when it is found dead. Used
// only by the thread that owns it.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include <statepact/types.hpp>

#include "conninfo.hpp"

namespace statepact::detail::pg {

struct Settings {
  std::string conninfo;  // with connect_timeout added
  std::string schema;
  std::string application_name;
  milliseconds statement_timeout{0};
  milliseconds lock_timeout{0};
  std::vector<std::string> secrets;  // of conninfo, never printed
  std::string target;                // the user's connection string, passwords removed
  milliseconds idle_in_transaction_timeout{0};
};

// The statement that sets a new connection up, and its parameters ($1..$5): parameters rather
// than quoting on the client, so names never become SQL text. The server functions rely on READ
// COMMITTED (each statement sees every commit that finished before its row locks were granted),
// whatever default the database or role sets.
inline constexpr const char* setup_sql =
    "SELECT set_config('statement_timeout', $1, false), "
    "set_config('lock_timeout', $2, false), "
    "set_config('default_transaction_isolation', 'read committed', false), "
    "set_config('search_path', quote_ident($3), false), "
    "set_config('client_min_messages', 'warning', false), "
    "set_config('application_name', $4, false), "
    "set_config('idle_in_transaction_session_timeout', $5, false)";
std::vector<std::string> setup_params(const Settings& s);

// A connection could not be made: ConfigurationError when retrying cannot help (a wrong
// connection string, a refused role), BackendUnavailableError otherwise. `what` is libpq's text.
[[noreturn]] void connect_failed(const Settings& s, const std::string& what);

// What all connections of one backend share: settings, and whether the schema is migrated.
class Shared {
 public:
  explicit Shared(Settings s) : settings_(std::move(s)) {}
  const Settings& settings() const { return settings_; }
  // Runs the migration on `conn` unless an earlier connection already did.
  void ensure_migrated(pqxx::connection& conn);

 private:
  Settings settings_;
  std::mutex mu_;
  bool migrated_ = false;
};

class Link {
 public:
  explicit Link(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}
  // The transaction goes before its connection (members alone would destroy them the other way
  // round, and the transaction's rollback would use a freed connection).
  ~Link() { drop(); }
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  // A connection believed alive, connecting if needed. Throws BackendUnavailableError when it
  // cannot connect: nothing has been sent then.
  pqxx::connection& connection();
  // Forgets the connection (after it broke), so the next call connects afresh.
  void drop() noexcept;
  bool connected() const { return conn_ != nullptr; }
  // The connection an open session transaction runs on (never replaced while `tx` is open).
  pqxx::connection& current() { return *conn_; }

  // A pessimistic session's transaction on this connection, if one is open.
  std::unique_ptr<pqxx::work> tx;

 private:
  void connect();
  // An idle connection has nothing to read unless the server is closing it (terminated backend,
  // restart): such a connection is replaced before a statement is sent on it.
  bool looks_dead() const;

  std::shared_ptr<Shared> shared_;
  std::unique_ptr<pqxx::connection> conn_;
};

}  // namespace statepact::detail::pg
