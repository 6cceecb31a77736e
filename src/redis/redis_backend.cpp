// RedisBackend's operations: validation first (the same checks as every backend), then one script
// call, then the script's structured answer turned into the library's errors.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <map>
#include <optional>
#include <random>
#include <string_view>

#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include <statepact/backends/redis.hpp>
#include <statepact/detail/validate.hpp>
#include <statepact/detail/verdicts.hpp>

#include "colocation.hpp"
#include "commit_codec.hpp"
#include "lease_codec.hpp"
#include "lock_poll.hpp"
#include "redis_impl.hpp"
#include "reply_reader.hpp"
#include "server_check.hpp"
#include "server_errors.hpp"
#include "slot.hpp"
#include "state_codec.hpp"

namespace statepact {

namespace {

using detail::RedisReply;
using detail::Script;
using namespace detail::reply_reader;

// Every key matching a SCAN pattern, on every master (the one server when not a cluster); SCAN
// may return a key twice.
asio::awaitable<std::vector<std::string>> scan_keys(detail::RedisImpl& impl,
                                                    const std::string& pattern) {
  std::vector<std::string> out;
  const auto masters = co_await impl.router().masters();
  for (const auto& node : masters) {
    std::string cursor = "0";
    do {
      std::vector<std::string> args = {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"};
      RedisReply r = co_await node->call(std::move(args), detail::LostReply::read());
      if (r.is_error()) detail::throw_redis_server_error("SCAN", r.str);
      cursor = str_at(r, 0, "SCAN");
      for (const auto& k : at(r, 1, "SCAN").elements) out.push_back(k.str);
    } while (cursor != "0");
  }
  co_return out;
}

// Every key of a kind whose resource matches the glob, with its resource name, sorted by name. On
// a cluster, every master's keys.
asio::awaitable<std::vector<std::pair<std::string, std::string>>> scan_kind(
    detail::RedisImpl& impl, const char* kind, const std::optional<std::string>& glob) {
  const std::string pattern =
      impl.keys.scan_pattern(kind, glob ? detail::glob_literal_prefix(*glob) : std::string());
  std::map<std::string, std::string> found;  // name -> key
  for (auto& key : co_await scan_keys(impl, pattern)) {
    auto name = impl.keys.resource_of(kind, key);
    if (name && detail::glob_accepts(glob, *name)) found.emplace(std::move(*name), std::move(key));
  }
  co_return std::vector<std::pair<std::string, std::string>>(found.begin(), found.end());
}

// Batches of at most inspect_batch names for one script each: on a cluster, of one slot each
// (in the order of their first name), on one server in the order given.
std::vector<std::vector<std::size_t>> batches_of(const std::vector<std::string>& names,
                                                 bool by_slot);

bool first_is(const RedisReply& r, std::string_view word) {
  return r.type == RedisReply::Type::array && !r.elements.empty() &&
         r.elements[0].type == RedisReply::Type::string && r.elements[0].str == word;
}

bool integer_is(const RedisReply& r, long long n) {
  return r.type == RedisReply::Type::integer && r.integer == n;
}

// Whether `resource` may have keys in the form versions before the grouped form wrote
// (KeyLayout::earlier): a name with a group, on one server, which clients of such a version may
// still use during an upgrade: the acquire and register scripts look at them (key_layout.hpp). On a
// cluster they lie in another slot, and earlier versions never ran there.
asio::awaitable<bool> has_earlier_form(detail::RedisImpl& impl, const std::string& resource) {
  if (!detail::resource_group(resource)) co_return false;
  const bool cluster = co_await impl.router().clustered();
  co_return !cluster;
}

// Keys per script call when reading many: small enough not to block the server for long.
constexpr std::size_t inspect_batch = 256;

std::vector<std::vector<std::size_t>> batches_of(const std::vector<std::string>& names,
                                                 bool by_slot) {
  std::vector<std::vector<std::size_t>> out;
  std::map<int, std::size_t> open;  // slot -> its batch being filled
  for (std::size_t i = 0; i < names.size(); ++i) {
    const int slot = by_slot ? detail::resource_slot(names[i]) : 0;
    auto it = open.find(slot);
    if (it == open.end() || out[it->second].size() == inspect_batch) {
      out.emplace_back();
      it = open.insert_or_assign(slot, out.size() - 1).first;
    }
    out[it->second].push_back(i);
  }
  return out;
}

}  // namespace

RedisBackend::RedisBackend(asio::any_io_executor ex, std::string url, RedisOptions options)
    : impl_(std::make_shared<detail::RedisImpl>(std::move(ex), url, std::move(options))) {}

RedisBackend::~RedisBackend() {
  impl_->close();
}

namespace {

// The four reads check_server judges, on a connection of its own (closed after).
asio::awaitable<RedisServerCheck> check_one(std::shared_ptr<detail::RedisConnection> conn,
                                            int replicas_to_ack, bool cluster_node) {
  std::vector<std::string> info_memory = {"INFO", "memory"};
  std::vector<std::string> info_persistence = {"INFO", "persistence"};
  std::vector<std::string> info_replication = {"INFO", "replication"};
  std::vector<std::string> config_fsync = {"CONFIG", "GET", "appendfsync"};
  std::exception_ptr failure;
  RedisReply memory, persistence, replication, fsync;
  try {
    memory = co_await conn->call(std::move(info_memory), detail::LostReply::read());
    persistence = co_await conn->call(std::move(info_persistence), detail::LostReply::read());
    replication = co_await conn->call(std::move(info_replication), detail::LostReply::read());
    // An error reply here (CONFIG renamed, or refused by an ACL) leaves the value unknown.
    fsync = co_await conn->call(std::move(config_fsync), detail::LostReply::read());
  } catch (...) {
    failure = std::current_exception();
  }
  conn->close();
  if (failure) std::rethrow_exception(failure);
  co_return detail::judge_redis_server(memory, persistence, replication, fsync, replicas_to_ack,
                                       cluster_node);
}

}  // namespace

asio::awaitable<RedisServerCheck> RedisBackend::check_server() {
  auto impl = impl_;
  const int acks = impl->options.replicas_to_ack();
  // A server the backend refuses (eviction) is no cluster as far as it can tell: checked alone.
  bool cluster = false;
  try {
    cluster = co_await impl->router().clustered();
  } catch (const ConfigurationError&) {
  }
  if (!cluster) co_return co_await check_one(impl->unchecked_connection(), acks, false);
  // On a cluster, every node the map names, masters and replicas: "<host:port> <setting>".
  RedisServerCheck all;
  const auto nodes = impl->router().nodes();
  for (const auto& node : nodes) {
    RedisServerCheck one =
        co_await check_one(impl->router().unchecked_connection(node.host, node.port), acks, true);
    for (auto& setting : one.settings) {
      setting.setting = fmt::format("{}:{} {}", node.host, node.port, setting.setting);
      all.settings.push_back(std::move(setting));
    }
  }
  co_return all;
}

// ---- leases and fencing ---------------------------------------------------------------------

asio::awaitable<Lease> RedisBackend::acquire_lease(std::string resource, std::string owner,
                                                   milliseconds ttl) {
  detail::validate_name("resource name", resource);
  detail::validate_name("owner", owner);
  detail::validate_ttl(ttl);
  auto impl = impl_;
  auto call = detail::encode_acquire(impl->keys, resource, owner, ttl);
  const bool earlier = co_await has_earlier_form(*impl, resource);
  if (earlier) {
    call.keys.push_back(*impl->keys.earlier("lease", resource));
    call.keys.push_back(*impl->keys.earlier("fence", resource));
  }
  RedisReply r = co_await impl->eval_durable(
      Script::acquire, std::move(call.keys), std::move(call.args), detail::LostReply::write(),
      "the lease", [](const RedisReply& x) { return first_is(x, "ok"); });
  co_return detail::lease_or_raise(detail::decode_acquire(r, resource, owner, ttl), owner);
}

asio::awaitable<Lease> RedisBackend::renew_lease(Lease lease, std::optional<milliseconds> ttl) {
  detail::validate_lease(lease);
  const milliseconds t = ttl.value_or(lease.ttl);
  detail::validate_ttl(t);
  auto impl = impl_;
  auto call = detail::encode_renew(impl->keys, lease, t);
  RedisReply r = co_await impl->eval_durable(
      Script::renew, std::move(call.keys), std::move(call.args), detail::LostReply::write(),
      "the renewal", [](const RedisReply& x) { return first_is(x, "ok"); });
  co_return detail::renewed_or_raise(detail::decode_renew(r, lease, t), lease);
}

asio::awaitable<bool> RedisBackend::release_lease(Lease lease) {
  detail::validate_lease(lease);
  auto impl = impl_;
  auto call = detail::encode_release(impl->keys, lease);
  RedisReply r = co_await impl->eval(Script::release, std::move(call.keys), std::move(call.args));
  co_return detail::decode_release(r);
}

asio::awaitable<Token> RedisBackend::current_fence(std::string resource) {
  detail::validate_name("resource name", resource);
  auto impl = impl_;
  auto call = detail::encode_fence(impl->keys, resource);
  RedisReply r = co_await impl->eval(Script::fence, std::move(call.keys), std::move(call.args),
                                     detail::LostReply::read());
  co_return detail::decode_fence(r);
}

// ---- key layout upgrade ---------------------------------------------------------------------

asio::awaitable<RedisKeyLayoutUpgrade> RedisBackend::upgrade_key_layout() {
  auto impl = impl_;
  // resource -> its earlier keys -> where each goes (and its kind)
  std::map<std::string, std::map<std::string, detail::KeyLayout::Regrouped>> found;
  for (const auto& key : co_await scan_keys(*impl, impl->keys.regrouped_pattern()))
    if (auto move = impl->keys.regrouped(key)) found[move->resource][key] = *move;
  RedisKeyLayoutUpgrade out;
  out.resources = found.size();
  if (found.empty()) co_return out;
  if (co_await impl->router().clustered()) {
    std::string names;
    for (const auto& [name, keys] : found)
      if (names.size() < 200) names += fmt::format("{}'{}'", names.empty() ? "" : ", ", name);
    throw InvalidArgumentError(fmt::format(
        "redis: {} resource(s) with a group have keys in the form of versions before Redis "
        "Cluster support ({}); such keys lie in another slot than the grouped form, so they "
        "cannot be moved on a cluster. Nothing was changed",
        found.size(), names));
  }
  for (const auto& [name, moves] : found) {
    std::vector<std::string> keys = {impl->keys.fence(name)};
    std::vector<std::string> kinds;
    for (const auto& [from, move] : moves) {
      keys.push_back(from);
      keys.push_back(move.to);
      kinds.push_back(move.kind);
    }
    RedisReply r = co_await impl->eval_durable(
        Script::upgrade_layout, std::move(keys), std::move(kinds), detail::LostReply::write(),
        "the key-layout upgrade", [](const RedisReply&) { return true; });
    out.keys_moved += static_cast<std::size_t>(num_at(r, 0, "upgrade_key_layout"));
    for (std::size_t i = 1; i < r.elements.size(); ++i)
      out.left.push_back(name + " " + str_at(r, i, "upgrade_key_layout"));
  }
  co_return out;
}

// ---- inspection and revoke --------------------------------------------------------------------

asio::awaitable<std::vector<LeaseInfo>> RedisBackend::list_leases(std::optional<std::string> glob) {
  if (glob) detail::validate_glob(*glob);
  auto impl = impl_;
  const auto keys = co_await scan_kind(*impl, "lease", glob);
  std::vector<std::string> names;
  for (const auto& k : keys) names.push_back(k.first);
  const bool cluster = co_await impl->router().clustered();
  std::vector<LeaseInfo> out;
  for (const auto& batch : batches_of(names, cluster)) {
    std::vector<std::string> batch_keys;
    for (std::size_t i : batch) batch_keys.push_back(keys[i].second);
    std::vector<std::string> args;
    RedisReply r = co_await impl->eval(Script::lease_info, std::move(batch_keys), std::move(args),
                                       detail::LostReply::read());
    const std::uint64_t now = num_at(r, 0, "list_leases");
    for (std::size_t j = 0; j < batch.size(); ++j)
      if (auto info =
              detail::decode_live_lease(at(r, 1 + j, "list_leases"), keys[batch[j]].first, now))
        out.push_back(std::move(*info));
  }
  // Batches by slot come back out of name order.
  std::sort(out.begin(), out.end(),
            [](const LeaseInfo& a, const LeaseInfo& b) { return a.resource < b.resource; });
  co_return out;
}

asio::awaitable<std::optional<LeaseInfo>> RedisBackend::lease_holder(std::string resource) {
  detail::validate_name("resource name", resource);
  auto impl = impl_;
  std::vector<std::string> keys = {impl->keys.lease(resource)};
  std::vector<std::string> args;
  RedisReply r = co_await impl->eval(Script::lease_info, std::move(keys), std::move(args),
                                     detail::LostReply::read());
  co_return detail::decode_live_lease(at(r, 1, "lease_holder"), resource,
                                      num_at(r, 0, "lease_holder"));
}

asio::awaitable<std::vector<ResourceInfo>> RedisBackend::list_resources(
    std::optional<std::string> glob) {
  if (glob) detail::validate_glob(*glob);
  auto impl = impl_;
  const auto found = co_await scan_kind(*impl, "version", glob);
  std::vector<std::string> all;
  for (const auto& f : found) all.push_back(f.first);
  const bool cluster = co_await impl->router().clustered();
  std::vector<ResourceInfo> out;
  for (const auto& batch : batches_of(all, cluster)) {
    std::vector<std::string> names;
    for (std::size_t i : batch) names.push_back(all[i]);
    auto call = detail::encode_resource_info(impl->keys, names);
    RedisReply r = co_await impl->eval(Script::resource_info, std::move(call.keys),
                                       std::move(call.args), detail::LostReply::read());
    for (auto& info : detail::decode_resource_info(r, names))
      if (info) out.push_back(std::move(*info));  // empty: deleted since the scan
  }
  std::sort(out.begin(), out.end(),
            [](const ResourceInfo& a, const ResourceInfo& b) { return a.name < b.name; });
  co_return out;
}

asio::awaitable<std::optional<RevokedLease>> RedisBackend::revoke_lease(std::string resource) {
  detail::validate_name("resource name", resource);
  auto impl = impl_;
  auto call = detail::encode_revoke(impl->keys, resource);
  RedisReply r = co_await impl->eval_durable(
      Script::revoke, std::move(call.keys), std::move(call.args), detail::LostReply::write(),
      "the revocation", [](const RedisReply&) { return true; });  // "nothing to revoke" too
  co_return detail::decode_revoke(r, resource);
}

// ---- state ----------------------------------------------------------------------------------

asio::awaitable<bool> RedisBackend::register_resource(std::string name, Value initial_state,
                                                      ResourcePolicy policy) {
  detail::validate_initial_state(name, initial_state);
  auto impl = impl_;
  auto call = detail::encode_register(impl->keys, name, initial_state, policy);
  const bool earlier = co_await has_earlier_form(*impl, name);
  if (earlier) call.keys.push_back(*impl->keys.earlier("version", name));
  RedisReply r = co_await impl->eval_durable(
      Script::register_resource, std::move(call.keys), std::move(call.args),
      detail::LostReply::write(), "the registration",
      [](const RedisReply& x) { return !integer_is(x, -1); });  // created, or exists
  const bool created = detail::decode_register(r, name);
  impl->known.remember(name);
  co_return created;
}

asio::awaitable<void> RedisBackend::set_resource_policy(std::string name, ResourcePolicy policy) {
  detail::validate_name("resource name", name);
  auto impl = impl_;
  auto call = detail::encode_set_policy(impl->keys, name, policy);
  RedisReply r = co_await impl->eval_durable(
      Script::set_policy, std::move(call.keys), std::move(call.args), detail::LostReply::write(),
      "the policy change", [](const RedisReply& x) { return integer_is(x, 1); });
  detail::found_or_raise(detail::decode_set_policy(r, name));
}

asio::awaitable<ResourcePolicy> RedisBackend::resource_policy(std::string name) {
  detail::validate_name("resource name", name);
  auto impl = impl_;
  auto call = detail::encode_policy(impl->keys, name);
  RedisReply r = co_await impl->eval(Script::get_policy, std::move(call.keys), std::move(call.args),
                                     detail::LostReply::read());
  co_return detail::found_or_raise(detail::decode_policy(r, name));
}

asio::awaitable<Entry> RedisBackend::read(std::string resource, std::string key) {
  detail::validate_name("resource name", resource);
  detail::validate_name("key", key);
  auto impl = impl_;
  auto call = detail::encode_read(impl->keys, resource, key);
  RedisReply r = co_await impl->eval(Script::read, std::move(call.keys), std::move(call.args),
                                     detail::LostReply::read());
  co_return detail::found_or_raise(detail::decode_read(r, resource));
}

asio::awaitable<std::vector<ResourceSnapshot>> RedisBackend::snapshot(
    std::vector<std::string> resources) {
  for (const auto& r : resources) detail::validate_name("resource name", r);
  auto impl = impl_;
  if (detail::spans_slots(resources)) {
    const bool cluster = co_await impl->router().clustered();
    if (cluster) detail::require_one_slot("the snapshot", resources);
  }
  auto call = detail::encode_snapshot(impl->keys, resources);
  RedisReply r = co_await impl->eval(Script::snapshot, std::move(call.keys), std::move(call.args),
                                     detail::LostReply::read());
  co_return detail::found_or_raise(detail::decode_snapshot(r, resources));
}

// ---- sessions -------------------------------------------------------------------------------

asio::awaitable<SessionId> RedisBackend::begin_session(std::vector<std::string> resources,
                                                       Isolation) {
  auto impl = impl_;
  // A session's commit and locks are scripts over its resources: on a cluster they must share a
  // slot, and the session says so before it starts, not at its commit.
  if (detail::spans_slots(resources)) {
    const bool cluster = co_await impl->router().clustered();
    if (cluster) detail::require_one_slot("the session", resources);
  }
  if (!impl->known.all_known(resources)) {
    auto call = detail::encode_exists(impl->keys, resources);
    RedisReply r = co_await impl->eval(Script::exists, std::move(call.keys), std::move(call.args),
                                       detail::LostReply::read());
    detail::found_or_raise(detail::decode_exists(r, resources));
    impl->known.remember(resources);
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
  detail::LockPoll poll(
      std::chrono::steady_clock::now() + timeout,
      static_cast<unsigned>(session * 2654435761u) ^ static_cast<unsigned>(std::random_device()()));
  std::optional<Entry> entry;
  std::exception_ptr failure;
  try {
    for (;;) {
      auto call =
          detail::encode_lock(impl->keys, owner, resource, key, mode,
                              impl->options.lock_record_ttl(), detail::LockPoll::wait_record_ttl);
      poll.on_lock_sent();
      RedisReply r = co_await impl->eval(Script::lock, std::move(call.keys), std::move(call.args));
      detail::LockAnswer answer = detail::decode_lock(r);
      if (poll.on_lock(answer.verdict)) {
        entry = detail::entry_or_raise(std::move(answer), resource, key, mode, timeout);
        break;
      }
      // Record whom we wait for and walk the graph: a second script, in the graph's own slot.
      auto wait_call =
          detail::encode_wait(impl->keys, owner, answer.holders, detail::LockPoll::wait_record_ttl);
      RedisReply w =
          co_await impl->eval(Script::wait, std::move(wait_call.keys), std::move(wait_call.args));
      if (poll.on_wait(detail::decode_wait(w))) {
        answer.verdict = detail::Verdict::deadlock;
        entry = detail::entry_or_raise(std::move(answer), resource, key, mode, timeout);
        break;
      }
      const auto delay = poll.next_delay(std::chrono::steady_clock::now());
      if (!delay) throw detail::lock_timed_out(timeout, mode, resource, key);
      asio::steady_timer timer(co_await asio::this_coro::executor, *delay);
      co_await timer.async_wait(asio::use_awaitable);
    }
  } catch (...) {
    failure = std::current_exception();
  }
  // Whatever ended the wait (a grant, a timeout, cancellation), it no longer waits for anything;
  // leaving without the lock, it gives up its place in the queue at once, not at its expiry.
  if (poll.recorded()) {
    std::vector<std::string> clear = {"HDEL", impl->keys.waits(), owner};
    impl->fire_command(impl->keys.waits(), std::move(clear));
  }
  if (poll.queued()) {
    const std::string queue = impl->keys.lock_queue(resource, key);
    std::vector<std::string> leave = {"HDEL", queue, owner};
    impl->fire_command(queue, std::move(leave));
  }
  if (failure) std::rethrow_exception(failure);
  co_return std::move(*entry);
}

void RedisBackend::end_session(SessionId session) noexcept {
  try {
    auto locks = impl_->take_locks(session);
    if (!locks) return;  // never asked for a lock: nothing to release
    const std::string owner = impl_->lock_owner(session);
    // On a cluster, one script per slot (a script touches one slot only; the session's resources
    // share one, so this is one script there too); on one server, one script for all.
    if (impl_->router().clustered_if_known().value_or(false)) {
      std::map<int, std::vector<std::string>> by_slot;
      for (auto& k : *locks) by_slot[detail::key_slot(k)].push_back(std::move(k));
      for (auto& [slot, keys] : by_slot) {
        auto call = detail::encode_unlock(std::move(keys), owner);
        impl_->fire(Script::unlock, std::move(call.keys), std::move(call.args));
      }
      return;
    }
    auto call = detail::encode_unlock(std::move(*locks), owner);
    impl_->fire(Script::unlock, std::move(call.keys), std::move(call.args));
  } catch (...) {
  }
}

milliseconds RedisBackend::idempotency_retention() const {
  return impl_->options.idempotency_retention();
}

asio::awaitable<CommitResult> RedisBackend::commit(CommitRequest req) {
  detail::validate_commit(req);
  auto impl = impl_;
  const auto locks = impl->locks_of(req.session);
  // Only a session holding locks needs its lock owner name (to release them).
  const std::string owner = locks.empty() ? std::string() : impl->lock_owner(req.session);
  detail::EncodedCommit call =
      detail::encode_commit(req, impl->keys, impl->options.idempotency_retention(), locks, owner);
  if (detail::spans_slots(call.resources)) {
    const bool cluster = co_await impl->router().clustered();
    if (cluster) detail::require_one_slot("the commit", call.resources);
  }
  const auto lost = detail::LostReply::commit(req.idempotency_key.has_value());
  RedisReply r;
  std::exception_ptr unknown;
  try {
    // A replay is confirmed as well: the first apply it reports may never have reached a replica.
    r = co_await impl->eval_durable(Script::commit, std::move(call.keys), std::move(call.args),
                                    lost, "the commit",
                                    [](const RedisReply& x) { return first_is(x, "ok"); });
  } catch (const CommitUnknownError&) {
    throw;
  } catch (const BackendUnavailableError&) {
    throw;  // nothing was sent, or the server refused the script before it ran
  } catch (const ConfigurationError&) {
    throw;
  } catch (const Error& e) {
    // Anything else came after the script was sent (a script error, a reply nobody expects):
    // Redis keeps the writes a script made before it failed.
    unknown = detail::commit_outcome_unknown(req, e.what());
  }
  if (unknown) std::rethrow_exception(unknown);
  CommitResult result = detail::result_or_raise(detail::commit_answer(r, req, call), req);
  (void)impl->take_locks(req.session);  // the script released them
  co_return result;
}

}  // namespace statepact
