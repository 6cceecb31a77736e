#include "router.hpp"

#include <random>

#include <fmt/format.h>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include <statepact/errors.hpp>

#include "cluster_step.hpp"
#include "server_errors.hpp"

namespace statepact::detail {

namespace {

std::string address(const std::string& host, int port) {
  return host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port)
                                             : fmt::format("{}:{}", host, port);
}

RedisConnection::Args command_of(std::vector<std::string> args) {
  return std::make_shared<const std::vector<std::string>>(std::move(args));
}

}  // namespace

RedisRouter::RedisRouter(asio::any_io_executor ex, RedisUrl url, ConnectionSettings settings,
                         std::vector<std::string> seeds)
    : ex_(std::move(ex)),
      url_(std::move(url)),
      settings_(std::move(settings)),
      seed_(std::make_shared<RedisConnection>(ex_, url_, settings_.command_timeout,
                                              settings_.connect_timeout, settings_.client_name,
                                              settings_.refuse_eviction)) {
  for (const auto& s : seeds) seeds_.push_back(parse_host_port("redis cluster seed", s));
}

std::optional<bool> RedisRouter::clustered_if_known() const {
  const Mode mode = mode_.load(std::memory_order_acquire);
  if (mode == Mode::unknown) return std::nullopt;
  return mode == Mode::cluster;
}

asio::awaitable<bool> RedisRouter::clustered() {
  if (auto known = clustered_if_known()) co_return *known;
  co_await probe();
  co_return *clustered_if_known();
}

asio::awaitable<void> RedisRouter::probe() {
  std::vector<std::string> ask = {"CLUSTER", "SLOTS"};
  RedisReply r = co_await seed_->call(std::move(ask), LostReply::read());
  if (r.is_error() && redis_busy_for_now(redis_error_code(r.str)))
    throw_redis_server_error("CLUSTER SLOTS", r.str);  // may be a cluster node: ask again later
  if (r.type != RedisReply::Type::array) {
    // Cluster support disabled, CLUSTER renamed or denied by an ACL: one server. Should it be a
    // cluster after all, its first MOVED says so.
    std::lock_guard guard(mu_);
    Mode unknown = Mode::unknown;
    mode_.compare_exchange_strong(unknown, Mode::single);
    co_return;
  }
  adopt(ClusterMap::from_slots_reply(r, url_.host));
}

void RedisRouter::adopt(ClusterMap map) {
  if (url_.db != 0)
    throw ConfigurationError(fmt::format(
        "redis: the server is a Redis Cluster node, which has database 0 only, and the URL names "
        "database {}: drop the database from the URL",
        url_.db));
  std::lock_guard guard(mu_);
  if (!url_.host.empty()) nodes_.emplace(HostPort{url_.host, url_.port}, seed_);
  map_ = std::move(map);
  by_slot_.assign(cluster_slot_count, nullptr);
  stale_ = false;
  mode_.store(Mode::cluster, std::memory_order_release);
}

void RedisRouter::stale() {
  std::lock_guard guard(mu_);
  stale_ = true;
}

bool RedisRouter::is_stale() const {
  std::lock_guard guard(mu_);
  return stale_ || !map_;
}

std::shared_ptr<RedisConnection> RedisRouter::node(const std::string& host, int port) {
  std::lock_guard guard(mu_);
  return node_locked(host, port);
}

std::shared_ptr<RedisConnection> RedisRouter::node_locked(const std::string& host, int port) {
  auto& conn = nodes_[HostPort{host, port}];
  if (!conn)
    conn = std::make_shared<RedisConnection>(ex_, url_for(host, port), settings_.command_timeout,
                                             settings_.connect_timeout, settings_.client_name,
                                             settings_.refuse_eviction);
  return conn;
}

RedisUrl RedisRouter::url_for(const std::string& host, int port) const {
  RedisUrl u = url_;
  u.host = host;
  u.port = port;
  u.unix_path.clear();
  return u;
}

std::shared_ptr<RedisConnection> RedisRouter::master_for(int slot) {
  std::lock_guard guard(mu_);
  if (stale_ || !map_ || slot < 0 || slot >= cluster_slot_count) return nullptr;
  // Remembered per slot: the hot path is one lock and an index.
  auto& cached = by_slot_[slot];
  if (!cached) {
    const ClusterNode* n = map_->master_of(slot);
    if (!n) return nullptr;
    cached = node_locked(n->host, n->port);
  }
  return cached;
}

std::string RedisRouter::host_of(const std::shared_ptr<RedisConnection>& conn) const {
  std::lock_guard guard(mu_);
  for (const auto& [where, c] : nodes_)
    if (c == conn) return where.host;
  return url_.host;
}

asio::awaitable<void> RedisRouter::refresh() {
  // The URL's node first, then the seeds, then every node the last map named.
  std::vector<HostPort> candidates = seeds_;
  for (const auto& n : nodes()) candidates.push_back(HostPort{n.host, n.port});
  std::string failures;
  for (std::size_t i = 0; i <= candidates.size(); ++i) {
    auto conn = i == 0 ? seed_ : node(candidates[i - 1].host, candidates[i - 1].port);
    const std::string host = i == 0 ? url_.host : candidates[i - 1].host;
    std::vector<std::string> ask = {"CLUSTER", "SLOTS"};
    std::string why;
    try {
      RedisReply r = co_await conn->call(std::move(ask), LostReply::read());
      if (!r.is_error()) {
        auto map = ClusterMap::from_slots_reply(r, host);
        if (map.unserved_slots() < cluster_slot_count) {
          adopt(std::move(map));
          co_return;
        }
        why = "it serves no slot";
      } else {
        why = r.str;
      }
    } catch (const Error& e) {
      why = e.what();
    }
    if (failures.size() < 1000)
      failures += fmt::format("{}{}: {}", failures.empty() ? "" : "; ",
                              i == 0 ? std::string("the URL's node")
                                     : address(candidates[i - 1].host, candidates[i - 1].port),
                              why);
  }
  throw BackendUnavailableError("redis cluster: no node gave the slot map (" + failures + ")");
}

asio::awaitable<std::vector<std::shared_ptr<RedisConnection>>> RedisRouter::masters() {
  std::vector<std::shared_ptr<RedisConnection>> out;
  if (!co_await clustered()) {
    out.push_back(seed_);
    co_return out;
  }
  if (is_stale()) co_await refresh();
  std::vector<ClusterNode> ms;
  {
    std::lock_guard guard(mu_);
    ms = map_->masters();
  }
  for (const auto& m : ms) out.push_back(node(m.host, m.port));
  co_return out;
}

asio::awaitable<RedisReply> RedisRouter::call(int slot, RedisConnection::Args cmd, LostReply lost,
                                              RedisConnection::Args after) {
  const auto deadline = std::chrono::steady_clock::now() + settings_.command_timeout;
  std::optional<Redirect> ask;
  int redirects = 0;
  for (int attempt = 0;; ++attempt) {
    RedisConnection::Around around;
    around.after = after;
    std::shared_ptr<RedisConnection> conn;
    // Until something says otherwise (a MOVED, or a listing that asked), one server.
    const bool cluster = clustered_if_known().value_or(false);
    if (!cluster) {
      conn = seed_;
    } else if (ask) {
      conn = node(ask->host, ask->port);
      around.before = command_of({"ASKING"});
    } else {
      conn = master_for(slot);
      if (!conn) {  // a stale map, or no master for the slot in it
        co_await refresh();
        conn = master_for(slot);
      }
    }
    std::optional<RedisReply> reply;
    std::string busy;  // why the cluster cannot take the command now
    if (!conn) {
      busy = fmt::format("no node serves slot {}", slot);
    } else {
      try {
        reply = co_await conn->call(cmd, lost, around);
      } catch (const BackendUnavailableError&) {
        if (cluster) stale();  // the node may have failed over: read the map again first
        throw;
      }
      const RedisReply& own = after && reply->type == RedisReply::Type::array &&
                                      reply->elements.size() == 2 && !reply->is_error()
                                  ? reply->elements[0]
                                  : *reply;
      ClusterStep step = cluster_step(own, cluster, redirects);
      if (step.kind == ClusterStep::Kind::deliver) co_return std::move(*reply);
      if (step.kind == ClusterStep::Kind::follow) {
        Redirect redirect = std::move(*step.redirect);
        if (redirect.host.empty()) redirect.host = host_of(conn);
        // Only a cluster node redirects: from now on the map routes every command.
        if (!cluster) co_await refresh();
        if (redirect.kind == Redirect::Kind::ask) {
          ask = std::move(redirect);
        } else {
          ask.reset();
          bool moved = !cluster;  // the map was just read
          if (cluster) {
            std::lock_guard guard(mu_);
            if (map_) {
              moved = map_->move(redirect.slot,
                                 ClusterNode{redirect.host, redirect.port, std::string()});
              by_slot_[redirect.slot] = nullptr;
            }
          }
          // A MOVED to where the map already points: read the whole map again.
          if (!moved) co_await refresh();
        }
        continue;
      }
      busy = own.str;
      if (redis_error_code(own.str) == "CLUSTERDOWN") stale();
      ask.reset();  // TRYAGAIN during a migration: ask the owner again, it redirects afresh
    }
    // The cluster cannot serve the slot for now (a failover or migration under way): wait and
    // retry within the command's deadline.
    // Seeded here, not per call: most calls never wait.
    thread_local std::minstd_rand jitter(std::random_device{}());
    const auto pause = retry_pause(attempt, static_cast<unsigned>(jitter()));
    if (std::chrono::steady_clock::now() + pause >= deadline) {
      if (reply) co_return std::move(*reply);  // TRYAGAIN / CLUSTERDOWN: the caller's error
      throw BackendUnavailableError(fmt::format("redis cluster: {} within {} ms; nothing was sent",
                                                busy, settings_.command_timeout.count()));
    }
    asio::steady_timer timer(co_await asio::this_coro::executor, pause);
    co_await timer.async_wait(asio::use_awaitable);
    if (!reply) stale();
  }
}

std::shared_ptr<RedisConnection> RedisRouter::unchecked_connection() const {
  return std::make_shared<RedisConnection>(ex_, url_, settings_.command_timeout,
                                           settings_.connect_timeout, settings_.client_name, false);
}

std::shared_ptr<RedisConnection> RedisRouter::unchecked_connection(const std::string& host,
                                                                   int port) const {
  return std::make_shared<RedisConnection>(ex_, url_for(host, port), settings_.command_timeout,
                                           settings_.connect_timeout, settings_.client_name, false);
}

std::vector<ClusterNode> RedisRouter::nodes() const {
  std::lock_guard guard(mu_);
  std::vector<ClusterNode> out;
  if (!map_) return out;
  for (const auto& m : map_->masters()) {
    out.push_back(m);
    for (int slot = 0; slot < cluster_slot_count; ++slot) {
      const ClusterNode* owner = map_->master_of(slot);
      if (owner && owner->same_address(m)) {
        for (const auto& r : map_->replicas_of(slot)) out.push_back(r);
        break;
      }
    }
  }
  return out;
}

void RedisRouter::close() {
  seed_->close();
  std::lock_guard guard(mu_);
  for (auto& [where, conn] : nodes_)
    if (conn != seed_) conn->close();
}

}  // namespace statepact::detail
