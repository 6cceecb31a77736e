// Whether a server URL's host is a loopback address. The harness pauses and kills processes and
// cuts connections, so it must never reach a shared server: the host itself is judged, not text
// anywhere in the URL (a password or database name may hold "127.0.0.1").
#pragma once

#include <string_view>

namespace statepact::chaos {

inline bool loopback_host(std::string_view host) {
  if (host == "localhost" || host == "::1") return true;
  // 127.0.0.0/8, written as four decimal parts.
  if (host.substr(0, 4) != "127.") return false;
  int parts = 1, digits = 0;  // the parts after "127."
  for (char c : host.substr(4)) {
    if (c == '.') {
      if (digits == 0) return false;
      ++parts;
      digits = 0;
    } else if (c >= '0' && c <= '9' && digits < 3) {
      ++digits;
    } else {
      return false;
    }
  }
  return parts == 3 && digits > 0;
}

// `scheme://[userinfo@]host[:port][/...][?...]`, the host in brackets for IPv6.
inline bool loopback_url(std::string_view url) {
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return false;
  auto authority = url.substr(scheme_end + 3);
  authority = authority.substr(0, authority.find_first_of("/?"));
  if (const auto at = authority.rfind('@'); at != std::string_view::npos)
    authority.remove_prefix(at + 1);
  std::string_view host;
  if (!authority.empty() && authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) return false;
    host = authority.substr(1, close - 1);
  } else {
    host = authority.substr(0, authority.find(':'));
  }
  return loopback_host(host);
}

}  // namespace statepact::chaos
