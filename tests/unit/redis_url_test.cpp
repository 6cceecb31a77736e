// The Redis URL parser: a table of good URLs with the fields they parse to, and of bad ones, each
// an InvalidArgumentError whose message never contains the password. No server.
#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

#include <statepact/errors.hpp>

#include "url.hpp"

namespace sp = statepact;
using namespace std::chrono_literals;
using sp::detail::parse_redis_url;

namespace {

struct Good {  // every member initialized here, so a row names only what it expects
  std::string url{};
  std::string host{};
  int port = 6379;
  std::string unix_path{};
  std::string user{};
  std::string password{};
  int db = 0;
  std::optional<sp::milliseconds> command_timeout{};
  std::optional<sp::milliseconds> connect_timeout{};
  std::optional<std::string> client_name{};
};

}  // namespace

TEST_CASE("redis urls: the fields each good url parses to", "[unit][redis-url]") {
  const std::vector<Good> table = {
      {.url = "redis://127.0.0.1:6379/0", .host = "127.0.0.1"},
      {.url = "redis://localhost", .host = "localhost"},
      {.url = "redis://cache.internal:6380/2", .host = "cache.internal", .port = 6380, .db = 2},
      {.url = "redis://:s3cret@host:6380/2",
       .host = "host",
       .port = 6380,
       .password = "s3cret",
       .db = 2},
      {.url = "redis://alice:s3cret@host/1",
       .host = "host",
       .user = "alice",
       .password = "s3cret",
       .db = 1},
      {.url = "redis://s3cret@host", .host = "host", .password = "s3cret"},
      {.url = "redis://alice:p%40ss%3Aw%2Frd%25@host",
       .host = "host",
       .user = "alice",
       .password = "p@ss:w/rd%"},
      {.url = "redis://al%69ce:pw@host", .host = "host", .user = "alice", .password = "pw"},
      {.url = "redis://:p@ss@host", .host = "host", .password = "p@ss"},
      {.url = "redis://[::1]:6380/3", .host = "::1", .port = 6380, .db = 3},
      {.url = "redis://[::1]", .host = "::1"},
      {.url = "redis://:pw@[fe80::1]:7000", .host = "fe80::1", .port = 7000, .password = "pw"},
      {.url = "redis://host:1", .host = "host", .port = 1},
      {.url = "redis://host:65535", .host = "host", .port = 65535},
      {.url = "redis://host/", .host = "host"},
      {.url = "unix:///tmp/redis.sock", .port = 6379, .unix_path = "/tmp/redis.sock"},
      {.url = "unix:///tmp/my%20redis.sock", .unix_path = "/tmp/my redis.sock"},
      {.url = "unix://:pw@/tmp/redis.sock?db=2",
       .unix_path = "/tmp/redis.sock",
       .password = "pw",
       .db = 2},
      {.url = "redis://host/0?timeout=2s", .host = "host", .command_timeout = 2000ms},
      {.url = "redis://host?connect_timeout=500ms&client_name=worker-1",
       .host = "host",
       .connect_timeout = 500ms,
       .client_name = "worker-1"},
      {.url = "redis://host:7000?socket_timeout=1.5&socket_connect_timeout=0.25&name=w%2D2",
       .host = "host",
       .port = 7000,
       .command_timeout = 1500ms,
       .connect_timeout = 250ms,
       .client_name = "w-2"},
      {.url = "redis://host?dial_timeout=3s&command_timeout=1m",
       .host = "host",
       .command_timeout = 60000ms,
       .connect_timeout = 3000ms},
      {.url = "redis://host?db=4", .host = "host", .db = 4},
      {.url = "redis://:pw@host/?timeout=100ms",
       .host = "host",
       .password = "pw",
       .command_timeout = 100ms},
  };
  for (const auto& g : table) {
    INFO(g.url);
    sp::detail::RedisUrl u;
    REQUIRE_NOTHROW(u = parse_redis_url(g.url));
    CHECK(u.host == g.host);
    CHECK(u.port == g.port);
    CHECK(u.unix_path == g.unix_path);
    CHECK(u.user == g.user);
    CHECK(u.password == g.password);
    CHECK(u.db == g.db);
    CHECK(u.command_timeout == g.command_timeout);
    CHECK(u.connect_timeout == g.connect_timeout);
    CHECK(u.client_name == g.client_name);
  }
}

TEST_CASE("redis urls: a bad url is an InvalidArgumentError that never shows the password",
          "[unit][redis-url]") {
  // Each holds the password Hunter2Pw (or a form of it); `names` is what the message must say.
  struct Bad {
    std::string url;
    std::string names;
  };
  const std::vector<Bad> table = {
      {"redis://:Hunter2Pw@host:99999", "port"},
      {"redis://:Hunter2Pw@host:65536", "port"},
      {"redis://:Hunter2Pw@host:0", "port"},
      {"redis://:Hunter2Pw@host:-1", "port"},
      {"redis://:Hunter2Pw@host:abc", "port"},
      {"redis://:Hunter2Pw@host:", "port"},
      {"redis://:Hunter2Pw@host/abc", "database"},
      {"redis://:Hunter2Pw@host/1/2", "database"},
      {"redis://:Hunter2Pw@host/1?db=2", "db"},
      {"redis://:Hunter2Pw@host?unknown=1", "'unknown'"},
      {"redis://:Hunter2Pw@host?password=Hunter2Pw", "'password'"},
      {"redis://:Hunter2Pw@host?timeout=abc", "timeout"},
      {"redis://:Hunter2Pw@host?timeout=0", "timeout"},
      {"redis://:Hunter2Pw@host?timeout=2parsecs", "timeout"},
      {"redis://:Hunter2Pw@host?timeout", "timeout"},
      {"redis://:Hunter2Pw@host?timeout=1s&timeout=2s", "timeout"},
      {"redis://:Hunter2Pw@host?client_name=a%20b", "client_name"},
      {"redis://alice:Hunter2%zzPw@host", "percent"},
      {"redis://alice:Hunter2%4@host", "percent"},
      {"redis://:Hunter2/Pw@host", "percent-encoded"},
      {"redis://:Hunter2?Pw@host", "percent-encoded"},
      {"redis://:Hunter2#Pw@host", "percent-encoded"},
      {"redis://:Hunter2Pw@", "host"},
      {"redis://:Hunter2Pw@[::1", "]"},
      {"redis://:Hunter2Pw@[::1]x", "port"},
      {"redis://:Hunter2Pw@::1:6379", "bracket"},
      {"http://:Hunter2Pw@host", "redis://"},
      {"rediss://:Hunter2Pw@host", "TLS"},
      {"unix://:Hunter2Pw@relative/path", "unix:///"},
      {"unix://:Hunter2Pw@", "unix:///"},
      {"redis://:Hunter2Pw@host#top", "#"},
      {"", "redis://"},
  };
  for (const auto& b : table) {
    INFO(b.url);
    std::optional<std::string> message;
    try {
      parse_redis_url(b.url);
    } catch (const sp::InvalidArgumentError& e) {
      message = e.what();
    }
    REQUIRE(message);
    INFO(*message);
    CHECK(message->find("Hunter2") == std::string::npos);
    CHECK(message->find(b.names) != std::string::npos);
  }
}

TEST_CASE("redis urls: parameters override the options set in code", "[unit][redis-url]") {
  const auto url = parse_redis_url("redis://host?timeout=2s&name=svc-a");
  const auto options = sp::detail::with_url_parameters(
      url, sp::RedisOptions().command_timeout(5s).connect_timeout(1s).client_name("code"));
  CHECK(options.command_timeout() == 2000ms);
  CHECK(options.connect_timeout() == 1000ms);  // not in the URL: as set in code
  CHECK(options.client_name() == "svc-a");
  const auto plain = sp::detail::with_url_parameters(parse_redis_url("redis://host"),
                                                     sp::RedisOptions().command_timeout(5s));
  CHECK(plain.command_timeout() == 5000ms);
}

TEST_CASE("redis urls: cluster seeds and replicas_to_ack as parameters", "[unit][redis-url]") {
  const auto url = parse_redis_url(
      "redis://10.0.0.5:7001?cluster_seeds=10.0.0.6:7001,%5B::1%5D:7002&replicas_to_ack=1");
  REQUIRE(url.cluster_seeds);
  CHECK(*url.cluster_seeds == std::vector<std::string>{"10.0.0.6:7001", "[::1]:7002"});
  const auto options = sp::detail::with_url_parameters(url, sp::RedisOptions().replicas_to_ack(0));
  CHECK(options.cluster_seeds().size() == 2);
  CHECK(options.replicas_to_ack() == 1);
  for (const char* bad :
       {"redis://h?cluster_seeds=h", "redis://h?cluster_seeds=h:1,",
        "redis://h?cluster_seeds=", "redis://h?replicas_to_ack=17", "redis://h?replicas_to_ack=-1",
        "redis://h?replicas_to_ack=one", "redis://h?replicas_to_ack=1&replicas_to_ack=1"}) {
    INFO(bad);
    try {
      (void)parse_redis_url(bad);
      FAIL("accepted");
    } catch (const sp::InvalidArgumentError& e) {
      const std::string m = e.what();
      CHECK((m.find("cluster_seeds") != std::string::npos ||
             m.find("replicas_to_ack") != std::string::npos));
    }
  }
}
