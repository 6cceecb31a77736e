// The versioned schema migration. Safe when several processes start at once: it runs under a
// session advisory lock, in one transaction, and applies only versions not yet recorded.
#pragma once

#include <string>
#include <vector>

#include <pqxx/pqxx>

namespace statepact::detail::pg {

void migrate(pqxx::connection& conn, const std::string& schema);

// The newest version migrate() applies.
int latest_version();

// One schema version: its number and the SQL that brings the previous version to it.
struct Migration {
  int version;
  const char* sql;
};

// What migrate() applies to a schema recorded at version `current` (0: a new schema), in the
// order it applies them. Split from the I/O so the choice is unit-tested without a server.
std::vector<Migration> migrations_after(int current);

// A schema name as an SQL identifier. Names are validated (UTF-8, no control characters), so
// doubling the quotes is all the escaping needed.
std::string quote_ident(const std::string& name);

}  // namespace statepact::detail::pg
