// statepactctl's output: aligned tables for people, JSON for scripts, and URLs shown without
// their passwords.
#pragma once

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace statepactctl {

// Exit codes (docs/cli.md).
enum Exit : int {
  ok = 0,
  negative = 1,     // not found, nothing held, not the holder, an unsafe setting
  usage = 2,        // bad arguments, a malformed URL or glob
  unreachable = 3,  // the server could not be reached or did not answer
  failure = 4,      // anything else: the server refused (authentication, configuration), ...
};

// Display width of UTF-8 text: its code points (names are valid UTF-8 without control bytes).
inline std::size_t width(std::string_view s) {
  return static_cast<std::size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

class Table {
 public:
  explicit Table(std::vector<std::string> header) : rows_{std::move(header)} {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void print(std::FILE* out = stdout) const {
    std::vector<std::size_t> w(rows_.front().size(), 0);
    for (const auto& row : rows_)
      for (std::size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], width(row[i]));
    for (const auto& row : rows_) {
      std::string line;
      for (std::size_t i = 0; i < row.size(); ++i) {
        line += row[i];
        if (i + 1 < row.size()) line.append(w[i] - width(row[i]) + 2, ' ');
      }
      line.erase(line.find_last_not_of(' ') + 1);
      fmt::print(out, "{}\n", line);
    }
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

inline std::string seconds(std::chrono::milliseconds d) {
  return fmt::format("{:.1f}s", static_cast<double>(d.count()) / 1000.0);
}

inline void print_json(const nlohmann::json& j) {
  fmt::print("{}\n", j.dump(2));
}

// The password of a URL or connection string, if any: in redis://user:pass@host,
// postgresql://user:pass@host/db, a "password=..." query parameter, or a libpq "password=..." pair.
inline std::vector<std::string> secrets_of(const std::string& url) {
  std::vector<std::string> out;
  const auto scheme = url.find("://");
  if (scheme != std::string::npos) {
    const auto at = url.rfind('@');
    if (at != std::string::npos && at > scheme) {
      const auto colon = url.find(':', scheme + 3);
      if (colon != std::string::npos && colon < at)
        out.push_back(url.substr(colon + 1, at - colon - 1));
      else if (url.rfind("redis", 0) == 0)
        out.push_back(url.substr(scheme + 3, at - scheme - 3));
    }
  }
  for (auto p = url.find("password"); p != std::string::npos; p = url.find("password", p + 1)) {
    auto v = url.find_first_not_of(' ', p + 8);
    if (v == std::string::npos || url[v] != '=') continue;
    v = url.find_first_not_of(' ', v + 1);
    if (v == std::string::npos) continue;
    std::string value;
    if (url[v] == '\'') {  // a quoted libpq value, with \' and \\ escapes
      for (++v; v < url.size() && url[v] != '\''; ++v)
        value += url[v] == '\\' && v + 1 < url.size() ? url[++v] : url[v];
    } else {
      value = url.substr(v, url.find_first_of(" &#", v) - v);
    }
    out.push_back(value);
  }
  // A percent-encoded password may be shown decoded.
  const auto n = out.size();
  for (std::size_t i = 0; i < n; ++i) {
    std::string decoded;
    const std::string& s = out[i];
    for (std::size_t k = 0; k < s.size(); ++k) {
      if (s[k] == '%' && k + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[k + 1])) &&
          std::isxdigit(static_cast<unsigned char>(s[k + 2]))) {
        decoded += static_cast<char>(std::stoi(s.substr(k + 1, 2), nullptr, 16));
        k += 2;
      } else {
        decoded += s[k];
      }
    }
    if (decoded != s) out.push_back(decoded);
  }
  out.erase(std::remove(out.begin(), out.end(), std::string()), out.end());
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.size() > b.size(); });
  return out;
}

// Every occurrence of a secret replaced by "***".
inline std::string redact(std::string text, const std::vector<std::string>& secrets) {
  for (const auto& s : secrets)
    for (auto at = text.find(s); at != std::string::npos; at = text.find(s, at + 3))
      text.replace(at, s.size(), "***");
  return text;
}

}  // namespace statepactctl
