// RedisBackend's operations: validation first (the same checks as every backend), then one script
// call, then the script's structured answer turned into the library's errors.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <map>
#include <random>
#include <string_view>

#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include <statepact/backends/redis.hpp>
#include <statepact/detail/lease_rules.hpp>
#include <statepact/detail/lock_errors.hpp>
#include <statepact/detail/validate.hpp>

#include "commit_codec.hpp"
#include "redis_impl.hpp"
#include "reply_reader.hpp"
#include "server_errors.hpp"

namespace statepact {

namespace {

using detail::RedisReply;
using detail::Script;
using namespace detail::reply_reader;

time_point from_ms(std::uint64_t ms) {
  return time_point(std::chrono::duration_cast<Clock::duration>(milliseconds(ms)));
}

// "<version> <json>" is a value, "<version>" a tombstone; nil: never written.
Entry decode_entry(const RedisReply& v) {
  if (v.is_nil()) return Entry{};
  if (v.type != RedisReply::Type::string) malformed("a state entry");
  const auto space = v.str.find(' ');
  Entry e;
  e.version = parse_u64(std::string_view(v.str).substr(0, space), "a state entry");
  if (space != std::string::npos) e.value = parse_json(v.str.substr(space + 1), "a state entry");
  return e;
}

Lease lease_from(const std::string& resource, const std::string& owner, const RedisReply& r,
                 milliseconds ttl, const char* what) {
  Lease l;
  l.resource = resource;
  l.owner = owner;
  l.token = num_at(r, 1, what);
  l.expires_at = from_ms(num_at(r, 2, what));
  l.ttl = ttl;
  return l;
}

// A field of an INFO reply ("name:value" lines); empty when absent.
std::string info_field(const RedisReply& info, const std::string& name) {
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

RedisServerSetting setting(std::string name, std::string value, bool ok, std::string advice) {
  if (value.empty()) value = "unknown";
  return RedisServerSetting{std::move(name), std::move(value), ok, ok ? std::string() : advice};
}

// A lease hash as HMGET owner token exp ttl returned it; empty unless live at `now`.
std::optional<LeaseInfo> live_lease(const std::string& resource, const RedisReply& fields,
                                    std::uint64_t now, const char* what) {
  if (fields.type != RedisReply::Type::array || fields.elements.size() != 4) malformed(what);
  if (fields.elements[0].is_nil() || fields.elements[2].is_nil()) return std::nullopt;
  const std::uint64_t exp = num_at(fields, 2, what);
  if (exp <= now) return std::nullopt;
  LeaseInfo info;
  info.resource = resource;
  info.owner = str_at(fields, 0, what);
  info.token = num_at(fields, 1, what);
  info.expires_at = from_ms(exp);
  info.ttl = milliseconds(fields.elements[3].is_nil() ? 0 : num_at(fields, 3, what));
  info.expires_in = milliseconds(exp - now);
  return info;
}

// Every key of a kind whose resource matches the glob, with its resource name, sorted by name.
asio::awaitable<std::vector<std::pair<std::string, std::string>>> scan_kind(
    detail::RedisImpl& impl, const char* kind, const std::optional<std::string>& glob) {
  const std::string pattern =
      impl.keys.scan_pattern(kind, glob ? detail::glob_literal_prefix(*glob) : std::string());
  std::map<std::string, std::string> found;  // name -> key; SCAN may return a key twice
  std::string cursor = "0";
  do {
    std::vector<std::string> args = {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"};
    RedisReply r = co_await impl.command(std::move(args), detail::CommandKind::read);
    if (r.is_error()) detail::throw_redis_server_error("SCAN", r.str);
    cursor = str_at(r, 0, "SCAN");
    const auto& keys = at(r, 1, "SCAN");
    for (const auto& k : keys.elements) {
      auto name = impl.keys.resource_of(kind, k.str);
      if (name && detail::glob_accepts(glob, *name)) found.emplace(std::move(*name), k.str);
    }
  } while (cursor != "0");
  co_return std::vector<std::pair<std::string, std::string>>(found.begin(), found.end());
}

// Keys per script call when reading many: small enough not to block the server for long.
constexpr std::size_t inspect_batch = 256;

}  // namespace

RedisBackend::RedisBackend(asio::any_io_executor ex, std::string url, RedisOptions options)
    : impl_(std::make_shared<detail::RedisImpl>(std::move(ex), url, std::move(options))) {}

RedisBackend::~RedisBackend() {
  impl_->close();
}

asio::awaitable<RedisServerCheck> RedisBackend::check_server() {
  auto conn = impl_->unchecked_connection();
  std::vector<std::string> info_memory = {"INFO", "memory"};
  std::vector<std::string> info_persistence = {"INFO", "persistence"};
  std::vector<std::string> info_replication = {"INFO", "replication"};
  std::vector<std::string> config_fsync = {"CONFIG", "GET", "appendfsync"};
  std::exception_ptr failure;
  RedisReply memory, persistence, replication, fsync;
  try {
    memory = co_await conn->call(std::move(info_memory), detail::CommandKind::read);
    persistence = co_await conn->call(std::move(info_persistence), detail::CommandKind::read);
    replication = co_await conn->call(std::move(info_replication), detail::CommandKind::read);
    // An error reply here (CONFIG renamed, or refused by an ACL) leaves the value unknown.
    fsync = co_await conn->call(std::move(config_fsync), detail::CommandKind::read);
  } catch (...) {
    failure = std::current_exception();
  }
  conn->close();
  if (failure) std::rethrow_exception(failure);

  RedisServerCheck check;
  const std::string policy = info_field(memory, "maxmemory_policy");
  check.settings.push_back(setting(
      "maxmemory-policy", policy, policy == "noeviction",
      "CONFIG SET maxmemory-policy noeviction: a server that may evict keys can drop a fence "
      "counter (tokens issued twice), a version (lost updates) or an idempotency record"));
  const std::string aof = info_field(persistence, "aof_enabled");
  check.settings.push_back(
      setting("appendonly",
              aof == "1"   ? "yes"
              : aof == "0" ? "no"
                           : aof,
              aof == "1",
              "CONFIG SET appendonly yes: without the append-only file a restart loses the fence "
              "counters written since the last snapshot (or all of them) and re-issues tokens"));
  std::string fsync_value;
  if (fsync.type == RedisReply::Type::array && fsync.elements.size() == 2)
    fsync_value = fsync.elements[1].str;
  check.settings.push_back(setting(
      "appendfsync", fsync_value, fsync_value == "always",
      fsync_value.empty()
          ? "could not be read (CONFIG renamed or refused): make sure it is 'always'; 'everysec' "
            "can lose the last second of fence counter increments in a crash and re-issue tokens"
          : "CONFIG SET appendfsync always: 'everysec' can lose the last second of fence counter "
            "increments in a crash and re-issue tokens"));
  const std::string role = info_field(replication, "role");
  const std::string replicas = info_field(replication, "connected_slaves");
  check.settings.push_back(setting(
      "replication",
      role.empty() ? std::string()
                   : role + ", " + (replicas.empty() ? "0" : replicas) + " replicas",
      role == "master" && (replicas.empty() || replicas == "0"),
      role == "master"
          ? "replication is asynchronous: after a failover the promoted replica may lack the "
            "latest tokens and writes and re-issue tokens; fail over only with the old primary "
            "fenced off and fully caught up, or use a single server"
          : "this server is a replica: writes fail with READONLY; point the backend at the "
            "primary"));
  co_return check;
}

// ---- leases and fencing ---------------------------------------------------------------------

asio::awaitable<Lease> RedisBackend::acquire_lease(std::string resource, std::string owner,
                                                   milliseconds ttl) {
  detail::validate_name("resource name", resource);
  detail::validate_name("owner", owner);
  detail::validate_ttl(ttl);
  auto impl = impl_;
  std::vector<std::string> keys = {impl->keys.lease(resource), impl->keys.fence(resource)};
  std::vector<std::string> args = {owner, std::to_string(ttl.count())};
  RedisReply r = co_await impl->eval(Script::acquire, std::move(keys), std::move(args));
  if (str_at(r, 0, "acquire") == "busy")
    throw LeaseNotAvailableError(resource, owner, str_at(r, 1, "acquire"), num_at(r, 2, "acquire"),
                                 from_ms(num_at(r, 3, "acquire")));
  co_return lease_from(resource, owner, r, ttl, "acquire");
}

asio::awaitable<Lease> RedisBackend::renew_lease(Lease lease, std::optional<milliseconds> ttl) {
  detail::validate_lease(lease);
  const milliseconds t = ttl.value_or(lease.ttl);
  detail::validate_ttl(t);
  auto impl = impl_;
  std::vector<std::string> keys = {impl->keys.lease(lease.resource),
                                   impl->keys.fence(lease.resource)};
  std::vector<std::string> args = {lease.owner, std::to_string(lease.token),
                                   std::to_string(t.count())};
  RedisReply r = co_await impl->eval(Script::renew, std::move(keys), std::move(args));
  if (str_at(r, 0, "renew") == "lost") {
    const auto loss = detail::lease_loss_named(str_at(r, 1, "renew"));
    if (!loss) malformed("renew");
    throw detail::lease_lost(lease, num_at(r, 2, "renew"), *loss);
  }
  co_return lease_from(lease.resource, lease.owner, r, t, "renew");
}

asio::awaitable<bool> RedisBackend::release_lease(Lease lease) {
  detail::validate_lease(lease);
  auto impl = impl_;
  std::vector<std::string> keys = {impl->keys.lease(lease.resource)};
  std::vector<std::string> args = {lease.owner, std::to_string(lease.token)};
  RedisReply r = co_await impl->eval(Script::release, std::move(keys), std::move(args));
  co_return r.type == RedisReply::Type::integer&& r.integer == 1;
}

asio::awaitable<Token> RedisBackend::current_fence(std::string resource) {
  detail::validate_name("resource name", resource);
  auto impl = impl_;
  std::vector<std::string> keys = {impl->keys.fence(resource), impl->keys.lease(resource)};
  std::vector<std::string> args;
  RedisReply r = co_await impl->eval(Script::fence, std::move(keys), std::move(args),
                                     detail::CommandKind::read);
  if (r.type != RedisReply::Type::string) malformed("current_fence");
  co_return parse_u64(r.str, "current_fence");
}

// ---- inspection and revoke --------------------------------------------------------------------

asio::awaitable<std::vector<LeaseInfo>> RedisBackend::list_leases(std::optional<std::string> glob) {
  if (glob) detail::validate_glob(*glob);
  auto impl = impl_;
  const auto keys = co_await scan_kind(*impl, "lease", glob);
  std::vector<LeaseInfo> out;
  for (std::size_t begin = 0; begin < keys.size(); begin += inspect_batch) {
    const std::size_t end = std::min(keys.size(), begin + inspect_batch);
    std::vector<std::string> batch;
    for (std::size_t i = begin; i < end; ++i) batch.push_back(keys[i].second);
    std::vector<std::string> args;
    RedisReply r = co_await impl->eval(Script::lease_info, std::move(batch), std::move(args),
                                       detail::CommandKind::read);
    const std::uint64_t now = num_at(r, 0, "list_leases");
    for (std::size_t i = begin; i < end; ++i)
      if (auto info =
              live_lease(keys[i].first, at(r, 1 + i - begin, "list_leases"), now, "list_leases"))
        out.push_back(std::move(*info));
  }
  co_return out;
}

asio::awaitable<std::optional<LeaseInfo>> RedisBackend::lease_holder(std::string resource) {
  detail::validate_name("resource name", resource);
  auto impl = impl_;
  std::vector<std::string> keys = {impl->keys.lease(resource)};
  std::vector<std::string> args;
  RedisReply r = co_await impl->eval(Script::lease_info, std::move(keys), std::move(args),
                                     detail::CommandKind::read);
  co_return live_lease(resource, at(r, 1, "lease_holder"), num_at(r, 0, "lease_holder"),
                       "lease_holder");
}

asio::awaitable<std::vector<ResourceInfo>> RedisBackend::list_resources(
    std::optional<std::string> glob) {
  if (glob) detail::validate_glob(*glob);
  auto impl = impl_;
  const auto found = co_await scan_kind(*impl, "version", glob);
  std::vector<ResourceInfo> out;
  for (std::size_t begin = 0; begin < found.size(); begin += inspect_batch) {
    const std::size_t end = std::min(found.size(), begin + inspect_batch);
    std::vector<std::string> keys;
    for (std::size_t i = begin; i < end; ++i) {
      keys.push_back(found[i].second);
      keys.push_back(impl->keys.policy(found[i].first));
    }
    std::vector<std::string> args;
    RedisReply r = co_await impl->eval(Script::resource_info, std::move(keys), std::move(args),
                                       detail::CommandKind::read);
    for (std::size_t i = begin; i < end; ++i) {
      const auto& row = at(r, i - begin, "list_resources");
      if (at(row, 0, "list_resources").is_nil()) continue;  // deleted since the scan
      ResourceInfo info;
      info.name = found[i].first;
      info.version = num_at(row, 0, "list_resources");
      const auto& policy = at(row, 1, "list_resources");
      info.policy.fence_required = !policy.is_nil() && policy.str == "1";
      out.push_back(std::move(info));
    }
  }
  co_return out;
}

asio::awaitable<std::optional<RevokedLease>> RedisBackend::revoke_lease(std::string resource) {
  detail::validate_name("resource name", resource);
  auto impl = impl_;
  std::vector<std::string> keys = {impl->keys.lease(resource), impl->keys.fence(resource)};
  std::vector<std::string> args;
  RedisReply r = co_await impl->eval(Script::revoke, std::move(keys), std::move(args));
  if (str_at(r, 0, "revoke") == "none") co_return std::nullopt;
  RevokedLease out;
  out.lease.resource = resource;
  out.lease.owner = str_at(r, 1, "revoke");
  out.lease.token = num_at(r, 2, "revoke");
  out.lease.expires_at = from_ms(num_at(r, 3, "revoke"));
  out.lease.ttl = milliseconds(num_at(r, 4, "revoke"));
  out.fence = num_at(r, 5, "revoke");
  co_return out;
}

// ---- state ----------------------------------------------------------------------------------

asio::awaitable<bool> RedisBackend::register_resource(std::string name, Value initial_state,
                                                      ResourcePolicy policy) {
  detail::validate_initial_state(name, initial_state);
  auto impl = impl_;
  std::vector<std::string> keys = {impl->keys.version(name), impl->keys.state(name),
                                   impl->keys.policy(name)};
  std::vector<std::string> args;
  args.reserve(1 + 2 * initial_state.size());
  args.push_back(policy.fence_required ? "1" : "0");
  for (const auto& [key, value] : initial_state.items()) {
    args.push_back(key);
    args.push_back("0 " + value.dump());
  }
  RedisReply r = co_await impl->eval(Script::register_resource, std::move(keys), std::move(args));
  co_return r.type == RedisReply::Type::integer&& r.integer == 1;
}

asio::awaitable<void> RedisBackend::set_resource_policy(std::string name, ResourcePolicy policy) {
  detail::validate_name("resource name", name);
  auto impl = impl_;
  std::vector<std::string> keys = {impl->keys.version(name), impl->keys.policy(name)};
  std::vector<std::string> args = {policy.fence_required ? "1" : "0"};
  RedisReply r = co_await impl->eval(Script::set_policy, std::move(keys), std::move(args));
  if (r.type != RedisReply::Type::integer) malformed("set_resource_policy");
  if (r.integer == 0) throw ResourceNotFoundError(name);
}

asio::awaitable<ResourcePolicy> RedisBackend::resource_policy(std::string name) {
  detail::validate_name("resource name", name);
  auto impl = impl_;
  std::vector<std::string> keys = {impl->keys.version(name), impl->keys.policy(name)};
  std::vector<std::string> args;
  RedisReply r = co_await impl->eval(Script::get_policy, std::move(keys), std::move(args),
                                     detail::CommandKind::read);
  if (str_at(r, 0, "resource_policy") == "resource_not_found") throw ResourceNotFoundError(name);
  ResourcePolicy policy;
  const auto& field = at(r, 1, "resource_policy");
  // Absent: registered before policies were stored, which is the default policy.
  policy.fence_required = !field.is_nil() && field.str == "1";
  co_return policy;
}

asio::awaitable<Entry> RedisBackend::read(std::string resource, std::string key) {
  detail::validate_name("resource name", resource);
  detail::validate_name("key", key);
  auto impl = impl_;
  std::vector<std::string> keys = {impl->keys.version(resource), impl->keys.state(resource)};
  std::vector<std::string> args = {key};
  RedisReply r = co_await impl->eval(Script::read, std::move(keys), std::move(args),
                                     detail::CommandKind::read);
  if (str_at(r, 0, "read") == "resource_not_found") throw ResourceNotFoundError(resource);
  co_return decode_entry(at(r, 1, "read"));
}

asio::awaitable<std::vector<ResourceSnapshot>> RedisBackend::snapshot(
    std::vector<std::string> resources) {
  for (const auto& r : resources) detail::validate_name("resource name", r);
  auto impl = impl_;
  std::vector<std::string> keys;
  for (const auto& r : resources) {
    keys.push_back(impl->keys.version(r));
    keys.push_back(impl->keys.state(r));
  }
  std::vector<std::string> args;
  RedisReply r = co_await impl->eval(Script::snapshot, std::move(keys), std::move(args),
                                     detail::CommandKind::read);
  if (str_at(r, 0, "snapshot") == "resource_not_found")
    throw ResourceNotFoundError(nth(resources, num_at(r, 1, "snapshot"), "snapshot"));
  std::vector<ResourceSnapshot> out;
  out.reserve(resources.size());
  for (std::size_t i = 0; i < resources.size(); ++i) {
    ResourceSnapshot snap;
    snap.resource = resources[i];
    snap.version = num_at(r, 1 + 2 * i, "snapshot");
    const auto& flat = at(r, 2 + 2 * i, "snapshot");
    for (std::size_t k = 0; k + 1 < flat.elements.size(); k += 2)
      snap.entries[flat.elements[k].str] = decode_entry(flat.elements[k + 1]);
    out.push_back(std::move(snap));
  }
  co_return out;
}

// ---- sessions -------------------------------------------------------------------------------

asio::awaitable<SessionId> RedisBackend::begin_session(std::vector<std::string> resources,
                                                       Isolation) {
  auto impl = impl_;
  if (!resources.empty()) {
    std::vector<std::string> keys;
    for (const auto& r : resources) keys.push_back(impl->keys.version(r));
    std::vector<std::string> args;
    RedisReply r = co_await impl->eval(Script::exists, std::move(keys), std::move(args),
                                       detail::CommandKind::read);
    if (r.type != RedisReply::Type::integer) malformed("begin_session");
    if (r.integer != 0)
      throw ResourceNotFoundError(
          nth(resources, static_cast<std::uint64_t>(r.integer), "begin_session"));
  }
  co_return impl->next_session();
}

asio::awaitable<Entry> RedisBackend::lock(SessionId session, std::string resource, std::string key,
                                          LockMode mode, milliseconds timeout) {
  detail::validate_name("resource name", resource);
  detail::validate_name("key", key);
  auto impl = impl_;
  const std::string owner = impl->lock_owner(session);
  const std::string lock_key = impl->keys.lock(resource, key);
  // Tracked before the request goes out, so end_session releases it even if the reply is lost.
  impl->track_lock(session, lock_key);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // A waiter's record outlives a few polls, so a crashed waiter stops counting soon.
  const milliseconds wait_ttl(2000);
  std::minstd_rand rng(static_cast<unsigned>(session * 2654435761u) ^
                       static_cast<unsigned>(std::random_device()()));
  milliseconds backoff(2);
  bool waited = false;  // its record is in the wait-for graph
  std::exception_ptr failure;
  try {
    for (;;) {
      std::vector<std::string> keys = {lock_key, impl->keys.version(resource),
                                       impl->keys.state(resource)};
      std::vector<std::string> args = {owner, mode == LockMode::shared ? "S" : "X",
                                       std::to_string(impl->options.lock_record_ttl().count()),
                                       key};
      RedisReply r = co_await impl->eval(Script::lock, std::move(keys), std::move(args));
      const std::string& tag = str_at(r, 0, "lock");
      if (tag == "ok") {
        if (waited) {
          std::vector<std::string> clear = {"HDEL", impl->keys.waits(), owner};
          impl->fire_command(std::move(clear));
        }
        co_return decode_entry(at(r, 1, "lock"));
      }
      if (tag == "resource_not_found") throw ResourceNotFoundError(resource);
      if (tag != "wait") malformed("lock");
      // Record whom we wait for and walk the graph: a second script, in the graph's own slot.
      std::vector<std::string> graph = {impl->keys.waits()};
      std::vector<std::string> edges = {owner, std::to_string(wait_ttl.count())};
      for (std::size_t i = 1; i < r.elements.size(); ++i) edges.push_back(str_at(r, i, "lock"));
      waited = true;
      RedisReply w = co_await impl->eval(Script::wait, std::move(graph), std::move(edges));
      if (w.type != RedisReply::Type::string) malformed("wait");
      if (w.str == "deadlock") {
        waited = false;  // the script removed the record
        throw detail::lock_deadlock(mode, resource, key);
      }
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) throw detail::lock_timed_out(timeout, mode, resource, key);
      // Jittered so two pollers do not keep meeting at the same instant.
      std::uniform_int_distribution<long> jitter(backoff.count() / 2, backoff.count());
      auto delay =
          std::min<std::chrono::steady_clock::duration>(milliseconds(jitter(rng)), deadline - now);
      asio::steady_timer timer(co_await asio::this_coro::executor, delay);
      co_await timer.async_wait(asio::use_awaitable);
      backoff = std::min(backoff * 2, milliseconds(20));
    }
  } catch (...) {
    failure = std::current_exception();
  }
  // Whatever ended the wait (timeout, cancellation), it no longer waits for anything.
  if (waited) {
    std::vector<std::string> clear = {"HDEL", impl->keys.waits(), owner};
    impl->fire_command(std::move(clear));
  }
  std::rethrow_exception(failure);
}

void RedisBackend::end_session(SessionId session) noexcept {
  try {
    auto locks = impl_->take_locks(session);
    if (!locks) return;  // never asked for a lock: nothing to release
    const std::string owner = impl_->lock_owner(session);
    std::vector<std::string> keys = std::move(*locks);
    std::vector<std::string> args = {owner};
    impl_->fire(Script::unlock, std::move(keys), std::move(args));
  } catch (...) {
  }
}

asio::awaitable<CommitResult> RedisBackend::commit(CommitRequest req) {
  detail::validate_commit(req);
  auto impl = impl_;
  const auto locks = impl->locks_of(req.session);
  // Only a session holding locks needs its lock owner name (to release them).
  const std::string owner = locks.empty() ? std::string() : impl->lock_owner(req.session);
  detail::EncodedCommit call =
      detail::encode_commit(req, impl->keys, impl->options.idempotency_retention(), locks, owner);
  const auto kind =
      req.idempotency_key ? detail::CommandKind::commit_idempotent : detail::CommandKind::commit;
  RedisReply r =
      co_await impl->eval(Script::commit, std::move(call.keys), std::move(call.args), kind);
  CommitResult result = detail::result_or_raise(detail::decode_commit(r, req, call), req);
  (void)impl->take_locks(req.session);  // the script released them
  co_return result;
}

}  // namespace statepact
