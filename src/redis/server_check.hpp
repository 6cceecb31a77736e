// What `RedisBackend::check_server` concludes from the server's answers, without I/O: each setting
// the safety of tokens depends on (eviction, the append-only file, its fsync, replication), whether
// it is safe, and what to change when it is not.
#pragma once

#include <cstdlib>
#include <string>

#include <fmt/format.h>
#include <utility>

#include <statepact/backends/redis.hpp>

#include "reply.hpp"

namespace statepact::detail {

// A field of an INFO reply ("name:value" lines); empty when absent.
inline std::string info_field(const RedisReply& info, const std::string& name) {
  if (info.type != RedisReply::Type::string) return {};
  const std::string key = name + ":";
  for (std::size_t at = info.str.find(key); at != std::string::npos;
       at = info.str.find(key, at + 1)) {
    if (at != 0 && info.str[at - 1] != '\n') continue;
    const auto begin = at + key.size();
    return info.str.substr(begin, info.str.find_first_of("\r\n", begin) - begin);
  }
  return {};
}

inline RedisServerSetting server_setting(std::string name, std::string value, bool ok,
                                         std::string advice) {
  if (value.empty()) value = "unknown";
  return RedisServerSetting{std::move(name), std::move(value), ok, ok ? std::string() : advice};
}

// The replies to INFO memory, INFO persistence, INFO replication and CONFIG GET appendfsync (an
// error reply there, CONFIG being renamed or refused, leaves the value unknown). A master's
// replicas are safe when the backend waits for all of them (`replicas_to_ack`); a replica is
// expected on a cluster (`cluster_node`), where the backend never writes to it.
inline RedisServerCheck judge_redis_server(const RedisReply& memory, const RedisReply& persistence,
                                           const RedisReply& replication, const RedisReply& fsync,
                                           int replicas_to_ack = 0, bool cluster_node = false) {
  RedisServerCheck check;
  const std::string policy = info_field(memory, "maxmemory_policy");
  check.settings.push_back(server_setting(
      "maxmemory-policy", policy, policy == "noeviction",
      "CONFIG SET maxmemory-policy noeviction: a server that may evict keys can drop a fence "
      "counter (tokens issued twice), a version (lost updates) or an idempotency record"));
  const std::string aof = info_field(persistence, "aof_enabled");
  check.settings.push_back(server_setting(
      "appendonly",
      aof == "1"   ? "yes"
      : aof == "0" ? "no"
                   : aof,
      aof == "1",
      "CONFIG SET appendonly yes: without the append-only file a restart loses the fence "
      "counters written since the last snapshot (or all of them) and re-issues tokens"));
  std::string fsync_value;
  if (fsync.type == RedisReply::Type::array && fsync.elements.size() == 2)
    fsync_value = fsync.elements[1].str;
  check.settings.push_back(server_setting(
      "appendfsync", fsync_value, fsync_value == "always",
      fsync_value.empty()
          ? "could not be read (CONFIG renamed or refused): make sure it is 'always'; 'everysec' "
            "can lose the last second of fence counter increments in a crash and re-issue tokens"
          : "CONFIG SET appendfsync always: 'everysec' can lose the last second of fence counter "
            "increments in a crash and re-issue tokens"));
  const std::string role = info_field(replication, "role");
  const std::string replicas = info_field(replication, "connected_slaves");
  const int replica_count = replicas.empty() ? 0 : std::atoi(replicas.c_str());
  const bool ok =
      role == "master" ? replica_count <= replicas_to_ack : role == "slave" && cluster_node;
  std::string advice;
  if (role == "master")
    advice = fmt::format(
        "replication is asynchronous: after a failover the promoted replica may lack the latest "
        "tokens and writes and re-issue tokens; set RedisOptions::replicas_to_ack({}) so every "
        "write waits for all {} replicas (docs/backends/redis.md, \"Failover\"), fail over only "
        "with the old primary fenced off and fully caught up, or use a single server",
        replica_count, replica_count);
  else
    advice =
        "this server is a replica: writes fail with READONLY; point the backend at the primary";
  check.settings.push_back(server_setting(
      "replication",
      role.empty() ? std::string()
                   : fmt::format("{}, {} replicas", role, replicas.empty() ? "0" : replicas),
      ok, advice));
  return check;
}

}  // namespace statepact::detail
