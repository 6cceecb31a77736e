// Parsing of the backend's URL:
//   redis://[[user]:password@]host[:port][/db][?parameters]
//   unix://[[user]:password@]/path/to/socket[?parameters]
// User, password and socket path are percent-decoded; an IPv6 host is written in brackets.
// Parameters (names as other Redis clients spell them): timeout, command_timeout, socket_timeout
// (the command timeout); connect_timeout, socket_connect_timeout, dial_timeout; client_name, name;
// db; cluster_seeds (host:port,host:port); replicas_to_ack. A duration is a number with a unit
// (ms, s, m, h) or a plain number of seconds.
// Pure: no server and no hiredis, so unit tests compile it.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <statepact/backends/redis.hpp>

namespace statepact::detail {

struct RedisUrl {
  std::string host;  // empty for a unix socket
  int port = 6379;
  std::string unix_path;  // set for unix://
  std::string user;       // Redis 6 ACL user; empty: AUTH with the password alone
  std::string password;   // empty: no AUTH
  int db = 0;
  // From the parameters; unset when the URL does not name them.
  std::optional<std::chrono::milliseconds> command_timeout;
  std::optional<std::chrono::milliseconds> connect_timeout;
  std::optional<std::string> client_name;
  std::optional<std::vector<std::string>> cluster_seeds;  // "host:port", comma-separated there
  std::optional<int> replicas_to_ack;
};

// Throws InvalidArgumentError on a malformed URL; no message ever contains the password.
RedisUrl parse_redis_url(const std::string& url);

// `options` with what the URL's parameters set: the URL wins over options set in code.
RedisOptions with_url_parameters(const RedisUrl& url, RedisOptions options);

}  // namespace statepact::detail
