// The state behind RedisBackend: the router (one server or a cluster), the script cache, and which
// lock records each local session may hold (so end_session knows what to release without a round
// trip first).
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
#include "router.hpp"

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
  upgrade_layout,
  count
};

class RedisImpl : public std::enable_shared_from_this<RedisImpl> {
 public:
  RedisImpl(asio::any_io_executor ex, const std::string& url, RedisOptions options);

  // Runs a script by SHA (loading it on first use, EVAL after NOSCRIPT) on the node of its keys'
  // slot (they share one: a cluster refuses anything else). Error replies throw.
  asio::awaitable<RedisReply> eval(Script script, std::vector<std::string> keys,
                                   std::vector<std::string> args,
                                   LostReply lost = LostReply::write());
  // Like eval, for a script that advances a fence or commits state: with replicas_to_ack(n) it
  // returns only once n replicas have the write, and throws what `lost` says a lost reply means
  // when they do not confirm it in time. `what` names the outcome for that error ("the lease").
  // `succeeded` tells a reply that changed something from a refusal, which needs no confirmation.
  template <class Succeeded>
  asio::awaitable<RedisReply> eval_durable(Script script, std::vector<std::string> keys,
                                           std::vector<std::string> args, LostReply lost,
                                           const char* what, Succeeded succeeded) {
    RedisReply both = co_await run(script, std::move(keys), std::move(args), lost, wait_);
    if (!wait_) co_return both;
    Acked acked = split_acks(std::move(both), lost, what);
    if (succeeded(acked.reply)) confirm_replicas(acked.wait, lost, what);
    co_return std::move(acked.reply);
  }
  // A command with keys, on the node of `key`'s slot.
  asio::awaitable<RedisReply> command(const std::string& key, std::vector<std::string> args,
                                      LostReply lost = LostReply::write());
  // Runs a script without anyone waiting for it (end_session): failures only cost the records'
  // expiry.
  void fire(Script script, std::vector<std::string> keys, std::vector<std::string> args) noexcept;
  // A command with keys (on `key`'s node), without anyone waiting for it.
  void fire_command(std::string key, std::vector<std::string> args) noexcept;

  std::string lock_owner(SessionId s) const { return instance_ + ":" + std::to_string(s); }
  SessionId next_session() { return ++next_session_; }
  void track_lock(SessionId s, const std::string& lock_key);
  std::vector<std::string> locks_of(SessionId s) const;
  std::optional<std::vector<std::string>> take_locks(SessionId s);

  void close() { router_.close(); }
  // A connection of its own, without the eviction check (check_server reads a refused server too).
  std::shared_ptr<RedisConnection> unchecked_connection() const {
    return router_.unchecked_connection();
  }
  RedisRouter& router() { return router_; }

  const RedisOptions options;
  const KeyLayout keys;
  // Resources storage confirmed: sessions over them begin without a round trip.
  KnownResources known{options.known_resources()};

 private:
  asio::awaitable<RedisReply> run(Script script, std::vector<std::string> keys,
                                  std::vector<std::string> args, LostReply lost,
                                  RedisConnection::Args after);
  // The script's reply and WAIT's.
  struct Acked {
    RedisReply reply;
    RedisReply wait;
  };
  static Acked split_acks(RedisReply both, LostReply lost, const char* what);
  // Throws unless WAIT counted enough replicas. The script ran before WAIT answered: a WAIT that
  // fails (-UNBLOCKED on a demotion or CLIENT UNBLOCK) leaves the outcome unknown, as a lost
  // reply does.
  void confirm_replicas(const RedisReply& wait, LostReply lost, const char* what) const;
  std::string sha_of(Script s) const;
  void remember_sha(Script s, std::string sha);

  asio::any_io_executor ex_;
  RedisRouter router_;
  // WAIT <replicas_to_ack> <timeout>, sent behind each durable script; null when none must confirm.
  RedisConnection::Args wait_;
  std::string instance_;
  std::atomic<SessionId> next_session_{0};
  mutable std::mutex mu_;
  std::array<std::string, static_cast<std::size_t>(Script::count)> shas_;
  std::unordered_map<SessionId, std::set<std::string>> session_locks_;
};

}  // namespace statepact::detail
