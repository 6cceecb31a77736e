#include "redis_impl.hpp"

#include <random>

#include <asio/co_spawn.hpp>

#include "script_run.hpp"
#include "scripts.hpp"
#include "server_errors.hpp"
#include "slot.hpp"

namespace statepact::detail {

namespace {

const char* source_of(Script s) {
  switch (s) {
    case Script::acquire:
      return scripts::acquire;
    case Script::renew:
      return scripts::renew;
    case Script::release:
      return scripts::release;
    case Script::fence:
      return scripts::fence;
    case Script::register_resource:
      return scripts::register_resource;
    case Script::set_policy:
      return scripts::set_policy;
    case Script::get_policy:
      return scripts::get_policy;
    case Script::read:
      return scripts::read;
    case Script::snapshot:
      return scripts::snapshot;
    case Script::exists:
      return scripts::exists;
    case Script::lock:
      return scripts::lock;
    case Script::wait:
      return scripts::wait;
    case Script::unlock:
      return scripts::unlock;
    case Script::commit:
      return scripts::commit;
    case Script::lease_info:
      return scripts::lease_info;
    case Script::resource_info:
      return scripts::resource_info;
    case Script::revoke:
      return scripts::revoke;
    case Script::upgrade_layout:
      return scripts::upgrade_layout;
    case Script::count:
      break;
  }
  throw Error(ErrorCode::invalid_argument, "redis: unknown script");
}

const char* name_of(Script s) {
  switch (s) {
    case Script::acquire:
      return "the acquire script";
    case Script::renew:
      return "the renew script";
    case Script::release:
      return "the release script";
    case Script::fence:
      return "the fence script";
    case Script::register_resource:
      return "the register script";
    case Script::set_policy:
      return "the set-policy script";
    case Script::get_policy:
      return "the policy script";
    case Script::read:
      return "the read script";
    case Script::snapshot:
      return "the snapshot script";
    case Script::exists:
      return "the begin-session script";
    case Script::lock:
      return "the lock script";
    case Script::wait:
      return "the wait script";
    case Script::unlock:
      return "the unlock script";
    case Script::commit:
      return "the commit script";
    case Script::lease_info:
      return "the lease-info script";
    case Script::resource_info:
      return "the resource-info script";
    case Script::revoke:
      return "the revoke script";
    case Script::upgrade_layout:
      return "the key-layout upgrade script";
    case Script::count:
      break;
  }
  return "a script";
}

// Distinguishes this backend's lock records from other processes' and other instances'.
std::string random_instance_id() {
  std::random_device rd;
  std::uint64_t v = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  return fmt::format("{:016x}", v);
}

asio::awaitable<void> run_detached(std::shared_ptr<RedisImpl> impl, Script script,
                                   std::vector<std::string> keys, std::vector<std::string> args) {
  co_await impl->eval(script, std::move(keys), std::move(args));
}

asio::awaitable<void> command_detached(std::shared_ptr<RedisImpl> impl, std::string key,
                                       std::vector<std::string> args) {
  co_await impl->command(key, std::move(args));
}

ConnectionSettings settings_of(const RedisOptions& o) {
  return ConnectionSettings{o.command_timeout(), o.connect_timeout(), o.client_name(),
                            !o.allow_eviction_unsafe()};
}

RedisConnection::Args wait_of(const RedisOptions& o) {
  if (o.replicas_to_ack() == 0) return nullptr;
  return std::make_shared<const std::vector<std::string>>(
      std::vector<std::string>{"WAIT", std::to_string(o.replicas_to_ack()),
                               std::to_string(o.replica_ack_timeout().count())});
}

// The slot every key of one script call lives in.
int slot_of_keys(const std::vector<std::string>& keys) {
  return keys.empty() ? 0 : key_slot(keys.front());
}

}  // namespace

RedisImpl::RedisImpl(asio::any_io_executor ex, const std::string& url, RedisOptions opts)
    : options(with_url_parameters(parse_redis_url(url), std::move(opts))),
      keys(options.key_prefix()),
      ex_(std::move(ex)),
      router_(ex_, parse_redis_url(url), settings_of(options), options.cluster_seeds()),
      wait_(wait_of(options)),
      instance_(random_instance_id()) {}

asio::awaitable<RedisReply> RedisImpl::command(const std::string& key,
                                               std::vector<std::string> args, LostReply lost) {
  auto cmd = std::make_shared<const std::vector<std::string>>(std::move(args));
  co_return co_await router_.call(key_slot(key), std::move(cmd), lost);
}

asio::awaitable<RedisReply> RedisImpl::eval(Script script, std::vector<std::string> keys_,
                                            std::vector<std::string> args, LostReply lost) {
  co_return co_await run(script, std::move(keys_), std::move(args), lost, nullptr);
}

asio::awaitable<RedisReply> RedisImpl::run(Script script, std::vector<std::string> keys_,
                                           std::vector<std::string> args, LostReply lost,
                                           RedisConnection::Args after) {
  const int slot = slot_of_keys(keys_);
  ScriptRun call(sha_of(script), source_of(script), name_of(script), std::move(keys_),
                 std::move(args));
  for (;;) {
    const auto cmd = call.command();
    const bool loading = call.loading();
    const LostReply this_lost = loading ? LostReply::read() : lost;
    // SCRIPT LOAD is no write: nothing to wait for behind it.
    RedisConnection::Args behind = loading ? nullptr : after;
    RedisReply r = co_await router_.call(slot, cmd, this_lost, behind);
    // The script's reply decides the next step; WAIT's count stays with it.
    std::optional<RedisReply> acks;
    if (behind && r.type == RedisReply::Type::array && r.elements.size() == 2) {
      acks = std::move(r.elements[1]);
      RedisReply own = std::move(r.elements[0]);
      r = std::move(own);
    }
    if (call.on_reply(std::move(r))) {
      RedisReply result = std::move(call).result();
      if (!behind) co_return result;
      RedisReply both;
      both.type = RedisReply::Type::array;
      both.elements.push_back(std::move(result));
      both.elements.push_back(acks ? std::move(*acks) : RedisReply());
      co_return both;
    }
    if (loading) remember_sha(script, call.learned_sha());
  }
}

RedisImpl::Acked RedisImpl::split_acks(RedisReply both, LostReply lost, const char* what) {
  if (both.type != RedisReply::Type::array || both.elements.size() != 2)
    std::rethrow_exception(
        lost_reply_error("redis", lost, Loss::no_reply,
                         fmt::format("an unexpected reply to the script and WAIT for {}", what)));
  return Acked{std::move(both.elements[0]), std::move(both.elements[1])};
}

void RedisImpl::confirm_replicas(const RedisReply& wait, LostReply lost, const char* what) const {
  std::string why;
  if (wait.is_error()) {
    why = fmt::format("WAIT for the replicas to confirm {} failed ({})", what, wait.str);
  } else if (wait.type != RedisReply::Type::integer) {
    why = fmt::format("an unexpected reply to WAIT for {}", what);
  } else if (wait.integer >= options.replicas_to_ack()) {
    return;
  } else {
    why = fmt::format(
        "only {} of the {} replicas replicas_to_ack asks for confirmed {} within {} ms (WAIT), so "
        "a failover now could lose it",
        wait.integer, options.replicas_to_ack(), what, options.replica_ack_timeout().count());
  }
  std::rethrow_exception(lost_reply_error("redis", lost, Loss::no_reply, why));
}

void RedisImpl::fire(Script script, std::vector<std::string> keys_,
                     std::vector<std::string> args) noexcept {
  try {
    asio::co_spawn(router_.strand(),
                   run_detached(shared_from_this(), script, std::move(keys_), std::move(args)),
                   [](std::exception_ptr) {});
  } catch (...) {
  }
}

void RedisImpl::fire_command(std::string key, std::vector<std::string> args) noexcept {
  try {
    asio::co_spawn(router_.strand(),
                   command_detached(shared_from_this(), std::move(key), std::move(args)),
                   [](std::exception_ptr) {});
  } catch (...) {
  }
}

void RedisImpl::track_lock(SessionId s, const std::string& lock_key) {
  std::lock_guard guard(mu_);
  session_locks_[s].insert(lock_key);
}

std::vector<std::string> RedisImpl::locks_of(SessionId s) const {
  std::lock_guard guard(mu_);
  auto it = session_locks_.find(s);
  if (it == session_locks_.end()) return {};
  return std::vector<std::string>(it->second.begin(), it->second.end());
}

std::optional<std::vector<std::string>> RedisImpl::take_locks(SessionId s) {
  std::lock_guard guard(mu_);
  auto it = session_locks_.find(s);
  if (it == session_locks_.end()) return std::nullopt;
  std::vector<std::string> out(it->second.begin(), it->second.end());
  session_locks_.erase(it);
  return out;
}

std::string RedisImpl::sha_of(Script s) const {
  std::lock_guard guard(mu_);
  return shas_[static_cast<std::size_t>(s)];
}

void RedisImpl::remember_sha(Script s, std::string sha) {
  std::lock_guard guard(mu_);
  shas_[static_cast<std::size_t>(s)] = std::move(sha);
}

}  // namespace statepact::detail
