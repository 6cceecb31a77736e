// Parsing of the backend's URL: redis://[[user]:password@]host[:port][/db] or unix:///path.
#pragma once

#include <string>

namespace statepact::detail {

struct RedisUrl {
  std::string host;  // empty for a unix socket
  int port = 6379;
  std::string unix_path;  // set for unix://
  std::string user;       // Redis 6 ACL user; empty: AUTH with the password alone
  std::string password;   // empty: no AUTH
  int db = 0;
};

// Throws InvalidArgumentError on a malformed URL.
RedisUrl parse_redis_url(const std::string& url);

}  // namespace statepact::detail
