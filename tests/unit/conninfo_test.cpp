// PostgreSQL connection strings in messages: the backend names its target by the connection string
// with the passwords left out, and removes them from libpq's messages too, which quote parts of a
// malformed string. A table of strings, each holding the password Hunter2Pw in some form. No
// server.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "conninfo.hpp"

using statepact::detail::pg::conninfo_secrets;
using statepact::detail::pg::redact;

TEST_CASE("postgres connection strings: no password survives redaction", "[unit][conninfo]") {
  struct Row {
    std::string conninfo;
    std::string shown;                  // the string as messages show it
    std::vector<std::string> messages;  // what libpq says about it, quoting parts of it
  };
  const std::vector<Row> table = {
      {"postgresql://u:Hunter2Pw@127.0.0.1:1/db", "postgresql://u:***@127.0.0.1:1/db", {}},
      {"postgres://:Hunter2Pw@host/db", "postgres://:***@host/db", {}},
      {"postgresql://u:Hunter%32Pw@host/db", "postgresql://u:***@host/db", {}},
      {"postgresql://u:Hunt%zzer2Pw@host/db",
       "postgresql://u:***@host/db",
       {"invalid percent-encoded token: \"Hunt%zzer2Pw\""}},
      {"postgresql://u@host/db?password=Hunter2Pw&sslmode=disable",
       "postgresql://u@host/db?password=***&sslmode=disable",
       {}},
      // libpq ends the user name and password at the first '@' before any '/': a '?' in the
      // password is the password's.
      {"postgresql://u:Hunt?er2Pw@127.0.0.1:1/db", "postgresql://u:***@127.0.0.1:1/db", {}},
      // An unencoded '/': libpq reads "u:Hunt" as host and port and quotes the pieces.
      {"postgresql://u:Hunt/er2Pw@127.0.0.1:1/db",
       "postgresql://u:***@127.0.0.1:1/db",
       {"invalid integer value \"Hunt\" for connection option \"port\""}},
      {"host=127.0.0.1 port=1 user=u password=Hunter2Pw",
       "host=127.0.0.1 port=1 user=u password=***",
       {}},
      {"host=h password = 'Hunter2 Pw' dbname=d", "host=h password = '***' dbname=d", {}},
      {"host=h password='Hunter2\\'Pw'", "host=h password='***'", {}},
  };
  for (const auto& row : table) {
    INFO(row.conninfo);
    const auto secrets = conninfo_secrets(row.conninfo);
    const std::string shown = redact(row.conninfo, secrets);
    CHECK(shown == row.shown);
    CHECK(shown.find("Hunt") == std::string::npos);
    for (const auto& m : row.messages) {
      INFO(m);
      CHECK(redact(m, secrets).find("Hunt") == std::string::npos);
    }
  }
  // Nothing secret: nothing changes.
  const std::string plain = "postgresql://u@host:5432/db?application_name=a@b";
  CHECK(redact(plain, conninfo_secrets(plain)) == plain);
}
