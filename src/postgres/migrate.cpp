#include "migrate.hpp"

#include <iterator>

#include <fmt/format.h>

#include "schema_sql.hpp"

namespace statepact::detail::pg {

namespace {

// Append only: a released version is never edited, a change is a new version.
constexpr Migration migrations[] = {{1, schema_v1_sql}, {2, schema_v2_sql}, {3, schema_v3_sql},
                                    {4, schema_v4_sql}, {5, schema_v5_sql}, {6, schema_v6_sql},
                                    {7, schema_v7_sql}, {8, schema_v8_sql}};

// Distinct from the lease (one bigint key) and idempotency (1936745331) advisory locks.
constexpr int migration_lock_class = 1936745332;

}  // namespace

int latest_version() {
  return std::end(migrations)[-1].version;
}

std::vector<Migration> migrations_after(int current) {
  std::vector<Migration> out;
  for (const auto& m : migrations)
    if (m.version > current) out.push_back(m);
  return out;
}

std::string quote_ident(const std::string& name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

void migrate(pqxx::connection& conn, const std::string& schema) {
  {
    pqxx::nontransaction n(conn);
    n.exec_params("SELECT pg_advisory_lock($1, hashtext($2))", migration_lock_class, schema);
  }
  auto unlock = [&] {
    pqxx::nontransaction n(conn);
    n.exec_params("SELECT pg_advisory_unlock($1, hashtext($2))", migration_lock_class, schema);
  };
  try {
    pqxx::work w(conn);
    const std::string s = quote_ident(schema);
    w.exec("CREATE SCHEMA IF NOT EXISTS " + s);
    w.exec(fmt::format(
        "CREATE TABLE IF NOT EXISTS {}.statepact_schema_version (version integer PRIMARY KEY, "
        "applied_at timestamptz NOT NULL DEFAULT now())",
        s));
    const int current =
        w.exec(fmt::format("SELECT coalesce(max(version), 0) FROM {}.statepact_schema_version", s))
            .at(0)
            .at(0)
            .as<int>();
    for (const auto& m : migrations_after(current)) {
      w.exec(m.sql);
      w.exec_params(fmt::format("INSERT INTO {}.statepact_schema_version (version) VALUES ($1)", s),
                    m.version);
    }
    w.commit();
  } catch (...) {
    try {
      unlock();
    } catch (...) {
    }
    throw;
  }
  unlock();
}

}  // namespace statepact::detail::pg
