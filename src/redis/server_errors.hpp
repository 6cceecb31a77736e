// Redis error replies mapped to the library's errors by meaning, in one place. Every exception the
// backend throws is a statepact::Error; the server's text is kept in the message.
#pragma once

#include <exception>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include <statepact/errors.hpp>

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

}  // namespace statepact::detail
