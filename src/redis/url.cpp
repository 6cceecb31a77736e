#include "url.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <string_view>

#include <fmt/format.h>

#include <statepact/detail/validate.hpp>
#include <statepact/errors.hpp>

namespace statepact::detail {

namespace {

// The URL as error messages show it. Conservative, because it must hold for URLs that do not
// parse: everything between "://" and the last '@' is userinfo (a password may hold an unencoded
// '@', '/' or '?'), shown as "user:***" or "***"; the value of a parameter that names a password
// is "***" too.
std::string shown(std::string_view url) {
  const auto scheme = url.find("://");
  if (scheme == std::string_view::npos)
    return url.find('@') == std::string_view::npos ? std::string(url) : "(not shown)";
  std::string out(url.substr(0, scheme + 3));
  std::string_view rest = url.substr(scheme + 3);
  if (const auto at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = rest.substr(0, at);
    const auto colon = userinfo.find(':');
    out += colon == std::string_view::npos ? std::string("***")
                                           : fmt::format("{}:***", userinfo.substr(0, colon));
    rest = rest.substr(at);
  }
  const auto q = rest.find('?');
  out += rest.substr(0, q);
  if (q == std::string_view::npos) return out;
  std::string_view query = rest.substr(q + 1);
  char sep = '?';
  for (;;) {
    const auto amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    const auto eq = param.find('=');
    const std::string_view name = param.substr(0, eq);
    out += sep;
    out += name;
    if (eq != std::string_view::npos) {
      std::string lower;
      for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      const bool secret = lower.find("pass") != std::string::npos ||
                          lower.find("auth") != std::string::npos ||
                          lower.find("secret") != std::string::npos;
      out += '=';
      out += secret ? std::string_view("***") : param.substr(eq + 1);
    }
    if (amp == std::string_view::npos) break;
    query = query.substr(amp + 1);
    sep = '&';
  }
  return out;
}

[[noreturn]] void bad(std::string_view url, const std::string& why) {
  throw InvalidArgumentError(fmt::format("redis url '{}': {}", shown(url), why));
}

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// `what` names the component; its text is never shown, since it may be the password.
std::string decoded(std::string_view url, std::string_view s, const char* what) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    const int hi = i + 1 < s.size() ? hex(s[i + 1]) : -1;
    const int lo = i + 2 < s.size() ? hex(s[i + 2]) : -1;
    if (hi < 0 || lo < 0) bad(url, fmt::format("invalid percent-encoding in the {}", what));
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

int parse_port(std::string_view url, std::string_view text) {
  int v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (!all_digits(text) || ec != std::errc() || end != text.data() + text.size() || v < 1 ||
      v > 65535)
    bad(url, fmt::format("bad port '{}': expected a number from 1 to 65535", text));
  return v;
}

int parse_db(std::string_view url, std::string_view text) {
  int v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (!all_digits(text) || ec != std::errc() || end != text.data() + text.size())
    bad(url, fmt::format("bad database number '{}': expected /0, /1, ...", text));
  return v;
}

// "2s", "500ms", "1.5m", "1h", or a plain number of seconds (as redis-py and go-redis read it).
milliseconds parse_duration(std::string_view url, std::string_view name, std::string_view text) {
  std::size_t n = 0;
  while (n < text.size() && (std::isdigit(static_cast<unsigned char>(text[n])) || text[n] == '.'))
    ++n;
  const std::string_view number = text.substr(0, n), unit = text.substr(n);
  double scale = 0;
  if (unit.empty() || unit == "s")
    scale = 1000;
  else if (unit == "ms")
    scale = 1;
  else if (unit == "m")
    scale = 60 * 1000;
  else if (unit == "h")
    scale = 3600 * 1000;
  double v = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
  const double ms = std::round(v * scale);
  if (number.empty() || ec != std::errc() || end != number.data() + number.size() || scale == 0 ||
      ms < 1 || ms > static_cast<double>(max_timeout.count()))
    bad(url,
        fmt::format("parameter '{}': bad duration '{}': expected e.g. 2s, 500ms, 1.5 (seconds) "
                    "from 1 ms to 1 h",
                    name, text));
  return milliseconds(static_cast<milliseconds::rep>(ms));
}

void parse_query(std::string_view url, std::string_view query, RedisUrl& out, bool db_in_path) {
  bool seen_command = false, seen_connect = false, seen_name = false, seen_db = false,
       seen_seeds = false, seen_acks = false;
  auto once = [&](bool& seen, std::string_view name) {
    if (seen)
      bad(url, fmt::format("parameter '{}' is given twice (or with another of its names)", name));
    seen = true;
  };
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (param.empty()) continue;
    const auto eq = param.find('=');
    const std::string name = decoded(url, param.substr(0, eq), "parameter name");
    if (eq == std::string_view::npos) bad(url, fmt::format("parameter '{}' has no value", name));
    const std::string value = decoded(url, param.substr(eq + 1), "parameter value");
    if (name == "timeout" || name == "command_timeout" || name == "socket_timeout") {
      once(seen_command, name);
      out.command_timeout = parse_duration(url, name, value);
    } else if (name == "connect_timeout" || name == "socket_connect_timeout" ||
               name == "dial_timeout") {
      once(seen_connect, name);
      out.connect_timeout = parse_duration(url, name, value);
    } else if (name == "client_name" || name == "name") {
      once(seen_name, name);
      try {
        RedisOptions().client_name(value);  // its own rules
      } catch (const InvalidArgumentError& e) {
        bad(url, fmt::format("parameter '{}': {}", name, e.what()));
      }
      out.client_name = value;
    } else if (name == "cluster_seeds") {
      once(seen_seeds, name);
      std::vector<std::string> seeds;
      // Every part, empty ones too, so "a:1," is refused rather than read as "a:1".
      for (std::size_t from = 0;;) {
        const auto comma = value.find(',', from);
        seeds.push_back(value.substr(from, comma - from));
        if (comma == std::string::npos) break;
        from = comma + 1;
      }
      try {
        RedisOptions().cluster_seeds(seeds);  // its own rules
      } catch (const InvalidArgumentError& e) {
        bad(url, fmt::format("parameter '{}': {}", name, e.what()));
      }
      out.cluster_seeds = std::move(seeds);
    } else if (name == "replicas_to_ack") {
      once(seen_acks, name);
      int n = -1;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc() || end != value.data() + value.size() || n < 0 || n > 16)
        bad(url, fmt::format("parameter '{}': expected 0 .. 16, got '{}'", name, value));
      out.replicas_to_ack = n;
    } else if (name == "db") {
      once(seen_db, name);
      if (db_in_path) bad(url, "the database is given twice: in the path and as parameter 'db'");
      out.db = parse_db(url, value);
    } else {
      bad(url, fmt::format("unknown parameter '{}' (known: timeout, command_timeout, "
                           "socket_timeout, connect_timeout, socket_connect_timeout, dial_timeout, "
                           "client_name, name, db, cluster_seeds, replicas_to_ack)",
                           name));
    }
  }
}

// An '@' past the authority, in the path or a parameter's name: the sign of a password with an
// unencoded '/', '?' or '#'. Refused without showing any part of it.
bool stray_at(std::string_view tail) {
  const auto q = tail.find('?');
  if (tail.substr(0, q).find('@') != std::string_view::npos) return true;
  if (q == std::string_view::npos) return false;
  for (std::string_view query = tail.substr(q + 1); !query.empty();) {
    const auto amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    if (param.substr(0, param.find('=')).find('@') != std::string_view::npos) return true;
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
  }
  return false;
}

// "[::1]:6380", "host:6380", "host": host and port.
void parse_host_port(std::string_view url, std::string_view hostport, RedisUrl& out) {
  if (!hostport.empty() && hostport[0] == '[') {
    const auto close = hostport.find(']');
    if (close == std::string_view::npos) bad(url, "an IPv6 address misses its closing ']'");
    out.host = std::string(hostport.substr(1, close - 1));
    const std::string_view after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') bad(url, "expected ':port' or nothing after an IPv6 address's ']'");
      out.port = parse_port(url, after.substr(1));
    }
  } else {
    const auto colon = hostport.find(':');
    if (colon != std::string_view::npos && hostport.find(':', colon + 1) != std::string_view::npos)
      bad(url, "an IPv6 address must be written in brackets, e.g. redis://[::1]:6379");
    out.host = std::string(hostport.substr(0, colon));
    if (colon != std::string_view::npos) out.port = parse_port(url, hostport.substr(colon + 1));
  }
  if (out.host.empty()) bad(url, "no host");
}

}  // namespace

RedisUrl parse_redis_url(const std::string& text) {
  const std::string_view url = text;
  RedisUrl out;
  const bool unix_socket = url.rfind("unix://", 0) == 0;
  if (url.rfind("rediss://", 0) == 0)
    bad(url, "TLS (rediss://) is not supported; use redis:// or unix:///path");
  if (!unix_socket && url.rfind("redis://", 0) != 0)
    bad(url, "expected redis://host:port/db or unix:///path");
  std::string_view rest = url.substr(unix_socket ? 7 : 8);
  // The authority ends at the first '/', '?' or '#'; its last '@' ends the user name and password.
  const auto authority_end = rest.find_first_of(unix_socket ? "/" : "/?#");
  std::string_view authority = rest.substr(0, authority_end);
  std::string_view tail =
      authority_end == std::string_view::npos ? std::string_view() : rest.substr(authority_end);
  if (!unix_socket && stray_at(tail))
    bad(url,
        "a '/', '?' or '#' in the user name or password must be percent-encoded (%2F, %3F, %23)");
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    const auto colon = userinfo.find(':');
    if (colon == std::string_view::npos) {
      out.password = decoded(url, userinfo, "password");
    } else {
      out.user = decoded(url, userinfo.substr(0, colon), "user name");
      out.password = decoded(url, userinfo.substr(colon + 1), "password");
    }
  }
  if (tail.find('#') != std::string_view::npos)
    bad(url, "a URL fragment ('#...') means nothing here");
  const auto q = tail.find('?');
  const std::string_view path = tail.substr(0, q);
  const std::string_view query =
      q == std::string_view::npos ? std::string_view() : tail.substr(q + 1);
  bool db_in_path = false;
  if (unix_socket) {
    if (!authority.empty() || path.empty()) bad(url, "expected unix:///path/to/socket");
    out.unix_path = decoded(url, path, "socket path");
  } else {
    parse_host_port(url, authority, out);
    if (path.size() > 1) {
      out.db = parse_db(url, path.substr(1));
      db_in_path = true;
    }
  }
  parse_query(url, query, out, db_in_path);
  return out;
}

RedisOptions with_url_parameters(const RedisUrl& url, RedisOptions options) {
  if (url.command_timeout) options.command_timeout(*url.command_timeout);
  if (url.connect_timeout) options.connect_timeout(*url.connect_timeout);
  if (url.client_name) options.client_name(*url.client_name);
  if (url.cluster_seeds) options.cluster_seeds(*url.cluster_seeds);
  if (url.replicas_to_ack) options.replicas_to_ack(*url.replicas_to_ack);
  return options;
}

}  // namespace statepact::detail
