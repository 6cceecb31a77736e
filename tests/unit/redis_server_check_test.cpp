// RedisBackend::check_server's verdicts from canned INFO and CONFIG replies, no server: each
// setting the tokens' safety depends on, safe or not, and unknown when it cannot be read.
#include <catch2/catch.hpp>

#include <string>

#include "server_check.hpp"  // src/redis

namespace d = statepact::detail;

namespace {

d::RedisReply info_reply(std::string text) {
  d::RedisReply r;
  r.type = d::RedisReply::Type::string;
  r.str = std::move(text);
  return r;
}

d::RedisReply fsync_reply(const char* value) {
  d::RedisReply r;
  r.type = d::RedisReply::Type::array;
  r.elements = {info_reply("appendfsync"), info_reply(value)};
  return r;
}

}  // namespace

TEST_CASE("redis server check: the documented safe settings pass", "[server_check][redis]") {
  const auto check = d::judge_redis_server(
      info_reply("# Memory\r\nused_memory:1\r\nmaxmemory_policy:noeviction\r\n"),
      info_reply("# Persistence\r\naof_enabled:1\r\n"),
      info_reply("# Replication\r\nrole:master\r\nconnected_slaves:0\r\n"), fsync_reply("always"));
  REQUIRE(check.settings.size() == 4);
  CHECK(check.ok());
  CHECK(check.settings[0].setting == "maxmemory-policy");
  CHECK(check.settings[1].value == "yes");
  CHECK(check.settings[2].value == "always");
  CHECK(check.settings[3].value == "master, 0 replicas");
  for (const auto& s : check.settings) CHECK(s.advice.empty());
}

TEST_CASE("redis server check: each unsafe setting is named with its fix",
          "[server_check][redis]") {
  const auto check = d::judge_redis_server(
      info_reply("maxmemory_policy:allkeys-lru\r\n"), info_reply("aof_enabled:0\r\n"),
      info_reply("role:master\r\nconnected_slaves:2\r\n"), fsync_reply("everysec"));
  REQUIRE(check.settings.size() == 4);
  CHECK_FALSE(check.ok());
  for (const auto& s : check.settings) {
    INFO(s.setting);
    CHECK_FALSE(s.ok);
    CHECK_FALSE(s.advice.empty());
  }
  CHECK(check.settings[0].value == "allkeys-lru");
  CHECK(check.settings[1].value == "no");
  CHECK(check.settings[3].value == "master, 2 replicas");
  CHECK(check.settings[3].advice.find("asynchronous") != std::string::npos);
}

TEST_CASE("redis server check: what cannot be read is unknown and not safe",
          "[server_check][redis]") {
  d::RedisReply refused;
  refused.type = d::RedisReply::Type::error;
  refused.str = "ERR unknown command 'CONFIG'";
  // A field is read only at the start of a line: "xmaxmemory_policy" is not the field.
  const auto check = d::judge_redis_server(info_reply("xmaxmemory_policy:noeviction\r\n"),
                                           info_reply(""), info_reply("role:slave\r\n"), refused);
  REQUIRE(check.settings.size() == 4);
  CHECK(check.settings[0].value == "unknown");
  CHECK_FALSE(check.settings[0].ok);
  CHECK(check.settings[1].value == "unknown");
  CHECK(check.settings[2].value == "unknown");
  CHECK(check.settings[2].advice.find("could not be read") != std::string::npos);
  CHECK_FALSE(check.settings[3].ok);
  CHECK(check.settings[3].advice.find("replica") != std::string::npos);
}

TEST_CASE("redis server check: replicas are safe when every write waits for all of them",
          "[server_check][redis]") {
  auto replication = [](int replicas_to_ack, const char* info, bool cluster_node) {
    return d::judge_redis_server(info_reply("maxmemory_policy:noeviction\r\n"),
                                 info_reply("aof_enabled:1\r\n"), info_reply(info),
                                 fsync_reply("always"), replicas_to_ack, cluster_node)
        .settings[3];
  };
  CHECK(replication(1, "role:master\r\nconnected_slaves:1\r\n", true).ok);
  CHECK(replication(2, "role:master\r\nconnected_slaves:1\r\n", false).ok);
  const auto short_of = replication(1, "role:master\r\nconnected_slaves:2\r\n", true);
  CHECK_FALSE(short_of.ok);
  CHECK(short_of.advice.find("replicas_to_ack(2)") != std::string::npos);
  // A cluster's replicas are never written to; a replica named as the server is a mistake.
  CHECK(replication(0, "role:slave\r\n", true).ok);
  CHECK_FALSE(replication(0, "role:slave\r\n", false).ok);
}
