// The state behind RedisBackend: the connection, the script cache, and which lock records each
// local session may hold (so end_session knows what to release without a round trip first).
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <asio/awaitable.hpp>

#include <statepact/backends/redis.hpp>
#include <statepact/detail/known_resources.hpp>

#include "connection.hpp"
#include "key_layout.hpp"

namespace statepact::detail {

enum class Script {
  acquire,
  renew,
  release,
  fence,
  register_resource,
  set_policy,
  get_policy,
  read,
  snapshot,
  exists,
  lock,
  wait,
  unlock,
  commit,
  lease_info,
  resource_info,
  revoke,
  count
};

class RedisImpl : public std::enable_shared_from_this<RedisImpl> {
 public:
  RedisImpl(asio::any_io_executor ex, const std::string& url, RedisOptions options);

  // Runs a script by SHA (loading it on first use, EVAL after NOSCRIPT). Error replies throw.
  asio::awaitable<RedisReply> eval(Script script, std::vector<std::string> keys,
                                   std::vector<std::string> args,
                                   LostReply lost = LostReply::write());
  asio::awaitable<RedisReply> command(std::vector<std::string> args,
                                      LostReply lost = LostReply::write());
  // Runs a script without anyone waiting for it (end_session): failures only cost the records'
  // expiry.
  void fire(Script script, std::vector<std::string> keys, std::vector<std::string> args) noexcept;
  void fire_command(std::vector<std::string> args) noexcept;

  std::string lock_owner(SessionId s) const { return instance_ + ":" + std::to_string(s); }
  SessionId next_session() { return ++next_session_; }
  void track_lock(SessionId s, const std::string& lock_key);
  std::vector<std::string> locks_of(SessionId s) const;
  std::optional<std::vector<std::string>> take_locks(SessionId s);

  void close() { conn_->close(); }
  // A connection of its own, without the eviction check (check_server reads a refused server too).
  std::shared_ptr<RedisConnection> unchecked_connection() const;

  const RedisOptions options;
  const KeyLayout keys;
  // Resources storage confirmed: sessions over them begin without a round trip.
  KnownResources known{options.known_resources()};

 private:
  std::string sha_of(Script s) const;
  void remember_sha(Script s, std::string sha);

  asio::any_io_executor ex_;
  RedisUrl url_;
  std::shared_ptr<RedisConnection> conn_;
  std::string instance_;
  std::atomic<SessionId> next_session_{0};
  mutable std::mutex mu_;
  std::array<std::string, static_cast<std::size_t>(Script::count)> shas_;
  std::unordered_map<SessionId, std::set<std::string>> session_locks_;
};

}  // namespace statepact::detail
