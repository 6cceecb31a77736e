// The host and port of a redis://[user:password@]host:port[/db] URL, for the benchmarks' command
// line tools (redis-benchmark, redis-cli) and their hiredis setup calls.
#pragma once

#include <string>

namespace statepact::bench {

struct RedisAddress {
  std::string host = "127.0.0.1";
  int port = 6379;
};

inline RedisAddress redis_address(const std::string& url) {
  RedisAddress a;
  std::string rest = url.substr(url.find("://") + 3);
  rest = rest.substr(rest.rfind('@') == std::string::npos ? 0 : rest.rfind('@') + 1);
  rest = rest.substr(0, rest.find('/'));
  const auto colon = rest.rfind(':');
  a.host = rest.substr(0, colon);
  if (colon != std::string::npos) a.port = std::stoi(rest.substr(colon + 1));
  return a;
}

}  // namespace statepact::bench
