#include "connection.hpp"

#include <poll.h>

#include <algorithm>
#include <cctype>
#include <string_view>

#include <fmt/format.h>

#include <statepact/errors.hpp>

#include "failures.hpp"
#include "migrate.hpp"
#include "statements.hpp"

namespace statepact::detail::pg {

namespace {

std::string percent_decoded(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Messages libpq writes when the connection string itself is wrong or the server refuses the
// role: retrying cannot help. Anything else (refused, unreachable, too many clients, starting up)
// may pass.
bool refused_for_good(const std::string& what) {
  static constexpr std::string_view patterns[] = {
      "authentication failed",   "no pg_hba.conf entry",  "does not exist",
      "permission denied",       "no password supplied",  "invalid connection option",
      "missing \"=\"",           "invalid URI",           "unterminated quoted string",
      "invalid percent-encoded", "invalid integer value", "invalid port number",
      "invalid sslmode"};
  return std::any_of(std::begin(patterns), std::end(patterns),
                     [&](std::string_view p) { return what.find(p) != std::string::npos; });
}

}  // namespace

std::vector<std::string> conninfo_secrets(const std::string& c) {
  std::vector<std::string> out;
  auto add = [&](std::string_view s) {
    if (s.empty()) return;
    out.emplace_back(s);
    if (auto d = percent_decoded(s); d != s) out.push_back(std::move(d));
  };
  if (c.rfind("postgresql://", 0) == 0 || c.rfind("postgres://", 0) == 0) {
    const std::size_t start = c.find("://") + 3;
    const std::size_t end = std::min(c.find_first_of("/?", start), c.size());
    const std::string_view authority = std::string_view(c).substr(start, end - start);
    if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
      const std::string_view userinfo = authority.substr(0, at);
      if (const auto colon = userinfo.find(':'); colon != std::string_view::npos)
        add(userinfo.substr(colon + 1));
    }
    if (const auto q = c.find('?'); q != std::string::npos) {
      std::string_view query = std::string_view(c).substr(q + 1);
      while (!query.empty()) {
        const auto amp = query.find('&');
        const std::string_view param = query.substr(0, amp);
        if (param.rfind("password=", 0) == 0) add(param.substr(9));
        query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
      }
    }
  } else {
    // keyword = value pairs; a value is either 'quoted' (backslash escapes) or ends at a space.
    for (std::size_t i = c.find("password"); i != std::string::npos;
         i = c.find("password", i + 1)) {
      std::size_t j = i + 8;
      while (j < c.size() && std::isspace(static_cast<unsigned char>(c[j]))) ++j;
      if (j >= c.size() || c[j] != '=') continue;
      ++j;
      while (j < c.size() && std::isspace(static_cast<unsigned char>(c[j]))) ++j;
      std::string raw, value;
      if (j < c.size() && c[j] == '\'') {
        for (++j; j < c.size() && c[j] != '\''; ++j) {
          raw += c[j];
          if (c[j] == '\\' && j + 1 < c.size()) raw += c[++j];
          value += c[j];
        }
      } else {
        for (; j < c.size() && !std::isspace(static_cast<unsigned char>(c[j])); ++j) raw += c[j];
        value = raw;
      }
      add(raw);
      if (value != raw) add(value);
    }
  }
  // Longest first, so a secret containing another is removed whole.
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.size() > b.size(); });
  return out;
}

std::string redact(std::string text, const std::vector<std::string>& secrets) {
  for (const auto& s : secrets)
    for (auto at = text.find(s); at != std::string::npos; at = text.find(s, at + 3))
      text.replace(at, s.size(), "***");
  return text;
}

void Shared::ensure_migrated(pqxx::connection& conn) {
  std::lock_guard guard(mu_);
  if (migrated_) return;
  migrate(conn, settings_.schema);
  migrated_ = true;
}

pqxx::connection& Link::connection() {
  if (conn_ && looks_dead()) drop();
  if (!conn_) connect();
  return *conn_;
}

void Link::drop() noexcept {
  tx.reset();
  try {
    conn_.reset();
  } catch (...) {
  }
}

bool Link::looks_dead() const {
  if (!conn_->is_open()) return true;
  pollfd p{conn_->sock(), POLLIN, 0};
  if (p.fd < 0) return true;
  return ::poll(&p, 1, 0) != 0;
}

void Link::connect() {
  const Settings& s = shared_->settings();
  std::string step = "setting up the connection";
  try {
    auto conn = std::make_unique<pqxx::connection>(s.conninfo);
    {
      // Parameters rather than quoting on the client: names never become SQL text. The server
      // functions rely on READ COMMITTED (each statement sees every commit that finished before
      // its row locks were granted), whatever default the database or role sets.
      pqxx::nontransaction setup(*conn);
      setup.exec_params(
          "SELECT set_config('statement_timeout', $1, false), "
          "set_config('lock_timeout', $2, false), "
          "set_config('default_transaction_isolation', 'read committed', false), "
          "set_config('search_path', quote_ident($3), false), "
          "set_config('client_min_messages', 'warning', false), "
          "set_config('application_name', $4, false), "
          "set_config('idle_in_transaction_session_timeout', $5, false)",
          std::to_string(s.statement_timeout.count()), std::to_string(s.lock_timeout.count()),
          s.schema, s.application_name, std::to_string(s.idle_in_transaction_timeout.count()));
    }
    step = fmt::format("migrating schema '{}'", s.schema);
    shared_->ensure_migrated(*conn);
    step = "preparing statements";
    for (const auto& st : stmt::all) conn->prepare(st.name, st.sql);
    conn_ = std::move(conn);
  } catch (const pqxx::broken_connection& e) {
    const std::string what = redact(e.what(), s.secrets);
    if (refused_for_good(what))
      configuration_failure(
          fmt::format("cannot connect to PostgreSQL at {}: {}; check the connection string, the "
                      "role and its password, and the server's pg_hba.conf",
                      s.target, what));
    throw BackendUnavailableError(
        fmt::format("cannot connect to PostgreSQL at {}: {}", s.target, what));
  } catch (const pqxx::sql_error& e) {
    sql_state_failed(*this, sqlstate_of(e), fmt::format("{}: {}", step, e.what()),
                     Outcome::nothing_applied, false);
  } catch (const pqxx::transaction_rollback& e) {
    sql_state_failed(*this, sqlstate_of(e), fmt::format("{}: {}", step, e.what()),
                     Outcome::nothing_applied, false);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw BackendUnavailableError(
        fmt::format("cannot set up a PostgreSQL connection to {} ({}): {}", s.target, step,
                    redact(e.what(), s.secrets)));
  }
}

}  // namespace statepact::detail::pg
