#include "conninfo.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>

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

}  // namespace

std::vector<std::string> conninfo_secrets(const std::string& c) {
  std::vector<std::string> out;
  auto add = [&](std::string_view s) {
    if (s.empty()) return;
    out.emplace_back(s);
    if (auto d = percent_decoded(s); d != s) out.push_back(std::move(d));
  };
  if (c.rfind("postgresql://", 0) == 0 || c.rfind("postgres://", 0) == 0) {
    constexpr auto npos = std::string_view::npos;
    const std::size_t start = c.find("://") + 3;
    const std::string_view rest = std::string_view(c).substr(start);
    std::size_t query_from = start;
    // libpq's rule: the user name and password end at the first '@' before any '/', so a '?' in
    // the password is the password's.
    if (const auto stop = rest.find_first_of("@/"); stop != npos && rest[stop] == '@') {
      const std::string_view userinfo = rest.substr(0, stop);
      if (const auto colon = userinfo.find(':'); colon != npos) add(userinfo.substr(colon + 1));
      query_from = start + stop + 1;
    } else if (const auto at = rest.substr(0, rest.find('?')).rfind('@'); at != npos) {
      // An '@' past a '/': most likely a password holding an unencoded '/', which libpq reads as
      // host and port and quotes in pieces. The whole and each piece are secret.
      const std::string_view userinfo = rest.substr(0, at);
      if (const auto colon = userinfo.find(':'); colon != npos) {
        std::string_view password = userinfo.substr(colon + 1);
        add(password);
        while (!password.empty()) {
          const auto slash = password.find('/');
          add(password.substr(0, slash));
          password = slash == npos ? std::string_view() : password.substr(slash + 1);
        }
      }
      query_from = start + at + 1;
    }
    if (const auto q = c.find('?', query_from); q != std::string::npos) {
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

}  // namespace statepact::detail::pg
