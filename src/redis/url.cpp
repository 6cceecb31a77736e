#include "url.hpp"

#include <charconv>

#include <statepact/errors.hpp>

namespace statepact::detail {

namespace {

// The URL as error messages show it: a password is replaced by "***".
std::string shown(const std::string& url) {
  const auto scheme = url.find("://");
  const auto at = url.rfind('@');
  if (scheme == std::string::npos || at == std::string::npos || at < scheme) return url;
  const auto colon = url.find(':', scheme + 3);
  if (colon == std::string::npos || colon > at)  // the userinfo is the password alone
    return url.substr(0, scheme + 3) + "***" + url.substr(at);
  return url.substr(0, colon + 1) + "***" + url.substr(at);
}

int parse_int(const std::string& url, const std::string& text, const char* what) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < 0)
    throw InvalidArgumentError(fmt::format("redis url '{}': bad {} '{}'", shown(url), what, text));
  return v;
}

}  // namespace

RedisUrl parse_redis_url(const std::string& url) {
  RedisUrl out;
  const std::string unix_scheme = "unix://", redis_scheme = "redis://";
  if (url.rfind(unix_scheme, 0) == 0) {
    out.unix_path = url.substr(unix_scheme.size());
    if (out.unix_path.empty() || out.unix_path[0] != '/')
      throw InvalidArgumentError(fmt::format("redis url '{}': expected unix:///path", shown(url)));
    return out;
  }
  if (url.rfind(redis_scheme, 0) != 0)
    throw InvalidArgumentError(
        fmt::format("redis url '{}': expected redis://host:port/db or unix:///path", shown(url)));
  std::string rest = url.substr(redis_scheme.size());
  if (auto at = rest.rfind('@'); at != std::string::npos) {
    std::string userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    auto colon = userinfo.find(':');
    if (colon == std::string::npos) {
      out.password = userinfo;
    } else {
      out.user = userinfo.substr(0, colon);
      out.password = userinfo.substr(colon + 1);
    }
  }
  if (auto slash = rest.find('/'); slash != std::string::npos) {
    std::string db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (!db.empty()) out.db = parse_int(url, db, "database number");
  }
  if (auto colon = rest.rfind(':'); colon != std::string::npos) {
    out.port = parse_int(url, rest.substr(colon + 1), "port");
    rest = rest.substr(0, colon);
  }
  if (rest.empty()) throw InvalidArgumentError(fmt::format("redis url '{}': no host", shown(url)));
  out.host = rest;
  return out;
}

}  // namespace statepact::detail
