// The versioned schema migration. Safe when several processes start at once: it runs under a
// session advisory lock, in one transaction, and applies only versions not yet recorded.
#pragma once

#include <string>

#include <pqxx/pqxx>

namespace statepact::detail::pg {

void migrate(pqxx::connection& conn, const std::string& schema);

// The newest version migrate() applies.
int latest_version();

}  // namespace statepact::detail::pg
