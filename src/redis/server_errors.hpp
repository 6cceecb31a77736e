// Redis error replies mapped to the library's errors by meaning, in one place: a command's, and
// those of a new connection's setup steps. Every exception the backend throws is a
// statepact::Error; the server's text is kept in the message.
#pragma once

#include <exception>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include <statepact/errors.hpp>

#include "url.hpp"

namespace statepact::detail {

// The first word of an error reply: its code ("ERR", "LOADING", "NOPERM", ...).
inline std::string_view redis_error_code(std::string_view reply) {
  return reply.substr(0, reply.find(' '));
}

// Replies that refuse a command for now; the server will take it later.
inline bool redis_busy_for_now(std::string_view code) {
  return code == "LOADING" || code == "BUSY" || code == "READONLY" || code == "MASTERDOWN" ||
         code == "TRYAGAIN" || code == "CLUSTERDOWN" || code == "OOM";
}

// `what` names the command ("the acquire script", "SELECT"). Each of these replies means the
// command was refused before it ran: a script that meets one did not run (LOADING, BUSY,
// MASTERDOWN, TRYAGAIN, CLUSTERDOWN refuse the command up front; READONLY and OOM refuse a
// script's first write, and every script here writes only after all its checks), so nothing was
// applied and even a commit may be retried: BackendUnavailableError, not CommitUnknownError.
inline std::exception_ptr redis_server_error(std::string_view what, const std::string& reply) {
  const auto code = redis_error_code(reply);
  if (redis_busy_for_now(code))
    return std::make_exception_ptr(BackendUnavailableError(fmt::format(
        "redis: {} was refused for now and did not run (retry later): {}", what, reply)));
  // Configuration the caller must fix; retrying cannot help.
  const char* fix = nullptr;
  if (code == "NOAUTH")
    fix = "the server requires a password: put it in the URL, redis://[user]:password@host";
  else if (code == "WRONGPASS")
    fix = "the user name or password in the URL is wrong";
  else if (code == "NOPERM")
    fix =
        "the server's ACL denies this user a command or key the backend needs (EVALSHA, EVAL, "
        "SCRIPT LOAD, INFO, CLIENT SETNAME, SELECT, and every key under the key prefix)";
  if (fix)
    return std::make_exception_ptr(
        ConfigurationError(fmt::format("redis: {} was refused: {}; fix: {}", what, reply, fix)));
  // Anything else is unexpected (a script error, a command this server does not know): not
  // retryable, since nobody knows whether retrying helps.
  return std::make_exception_ptr(
      Error(ErrorCode::backend_unavailable, fmt::format("redis: {} failed: {}", what, reply)));
}

[[noreturn]] inline void throw_redis_server_error(std::string_view what, const std::string& reply) {
  std::rethrow_exception(redis_server_error(what, reply));
}

// A new connection's setup steps, in the order they are sent.
enum SetupKind { setup_auth, setup_select, setup_setname, setup_eviction };

// A refused setup step. A server busy for now (LOADING, ...) is retryable; anything else is
// configuration the caller must fix, and the connection must not carry commands without it (a
// failed SELECT would leave them on database 0). The password is never part of the message.
inline std::exception_ptr setup_failure(int step, const std::string& reply, const RedisUrl& url) {
  const char* what = step == setup_auth      ? "AUTH"
                     : step == setup_select  ? "SELECT"
                     : step == setup_setname ? "CLIENT SETNAME"
                                             : "INFO memory";
  if (redis_busy_for_now(redis_error_code(reply)))
    return redis_server_error(fmt::format("{} (connection setup)", what), reply);
  std::string fix;
  switch (step) {
    case setup_auth:
      fix = "check the user name and password in the URL (and that the server has them)";
      break;
    case setup_select:
      fix = fmt::format(
          "the server has no database {} (its 'databases' setting), or the user may not select "
          "it: name an existing database in the URL",
          url.db);
      break;
    case setup_setname:
      fix =
          "the client name (RedisOptions::client_name) was refused: choose another, or allow "
          "CLIENT SETNAME to the user";
      break;
    default:
      fix =
          "allow INFO to the user (the backend reads maxmemory_policy from it), or skip the "
          "eviction check with RedisOptions::allow_eviction_unsafe(true), at your own risk";
  }
  return std::make_exception_ptr(ConfigurationError(fmt::format(
      "redis: {} failed while setting up the connection: {}; fix: {}", what, reply, fix)));
}

// The eviction check's verdict on an `INFO memory` reply: null when the policy is noeviction.
inline std::exception_ptr eviction_verdict(const std::string& info, const RedisUrl& url) {
  const std::string field = "maxmemory_policy:";
  std::string policy;
  if (auto at = info.find(field); at != std::string::npos) {
    const auto begin = at + field.size();
    policy = info.substr(begin, info.find_first_of("\r\n", begin) - begin);
  }
  if (policy == "noeviction") return nullptr;
  const std::string where =
      url.unix_path.empty() ? fmt::format("{}:{}", url.host, url.port) : url.unix_path;
  return std::make_exception_ptr(ConfigurationError(fmt::format(
      "redis server {} has maxmemory-policy '{}': a server that may evict keys can drop a fence "
      "counter, a resource's version or an idempotency record, which re-issues tokens and "
      "repeats versions. Fix: CONFIG SET maxmemory-policy noeviction (and set it in redis.conf); "
      "RedisOptions::allow_eviction_unsafe(true) skips this check, at the cost of that safety",
      where, policy.empty() ? "unknown" : policy)));
}

}  // namespace statepact::detail
