// Which connection carries a command. On one server, its one connection. On a Redis Cluster (found
// out from the first MOVED, or by asking CLUSTER SLOTS where it matters before anything is sent:
// a request over several slots, a listing), one connection per master,
// chosen by the slot of the command's keys; MOVED refreshes the slot map and resends, ASK resends
// once to the importing node after ASKING, TRYAGAIN and CLUSTERDOWN are retried within the
// command's deadline, and a lost connection makes the next command read the map again. Each of
// those replies means the command did not run, so resending is safe even for a commit.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>

#include <statepact/detail/validate.hpp>

#include "cluster_map.hpp"
#include "connection.hpp"
#include "url.hpp"

namespace statepact::detail {

struct ConnectionSettings {
  std::chrono::milliseconds command_timeout, connect_timeout;
  std::string client_name;
  bool refuse_eviction;
};

class RedisRouter {
 public:
  // `seeds`: more "host:port" addresses of the same cluster, asked for the map when the URL's
  // node does not answer.
  RedisRouter(asio::any_io_executor ex, RedisUrl url, ConnectionSettings settings,
              std::vector<std::string> seeds);

  // Whether the server is a cluster; asks it (one round trip) when not known yet.
  asio::awaitable<bool> clustered();
  // Known without asking: once asked, or once a node redirected a command.
  std::optional<bool> clustered_if_known() const;

  // Sends `cmd` to the node serving `slot` (any value on one server). `after` is sent right
  // behind it on the same link (RedisConnection::Around); the reply is then the pair.
  asio::awaitable<RedisReply> call(int slot, RedisConnection::Args cmd, LostReply lost,
                                   RedisConnection::Args after = {});
  // Every master (the one server when not a cluster), for commands that walk all keys (SCAN).
  asio::awaitable<std::vector<std::shared_ptr<RedisConnection>>> masters();

  // The strand commands without a waiting caller are started on.
  const asio::strand<asio::any_io_executor>& strand() const { return seed_->strand(); }
  // A connection of its own to the URL's node (or to `host:port`), without the eviction check.
  std::shared_ptr<RedisConnection> unchecked_connection() const;
  std::shared_ptr<RedisConnection> unchecked_connection(const std::string& host, int port) const;
  // Every node of the last map, masters and their replicas, in slot order.
  std::vector<ClusterNode> nodes() const;
  void close();

 private:
  enum class Mode { unknown, single, cluster };

  asio::awaitable<void> probe();
  // Reads the map from the first node that answers (the URL's, the seeds, every node known).
  asio::awaitable<void> refresh();
  std::shared_ptr<RedisConnection> node(const std::string& host, int port);
  std::shared_ptr<RedisConnection> node_locked(const std::string& host, int port);  // mu_ held
  std::shared_ptr<RedisConnection> master_for(int slot);
  // The URL with another node's address: same credentials, database and TLS settings.
  RedisUrl url_for(const std::string& host, int port) const;
  void adopt(ClusterMap map);
  void stale();
  bool is_stale() const;
  std::string host_of(const std::shared_ptr<RedisConnection>& conn) const;  // mu_ not held

  asio::any_io_executor ex_;
  RedisUrl url_;
  ConnectionSettings settings_;
  std::vector<HostPort> seeds_;
  std::shared_ptr<RedisConnection> seed_;
  mutable std::mutex mu_;
  std::atomic<Mode> mode_{Mode::unknown};  // read without the lock on every call
  std::optional<ClusterMap> map_;
  bool stale_ = false;
  // Each node's connection; a node that stopped serving slots keeps its idle one.
  std::map<HostPort, std::shared_ptr<RedisConnection>> nodes_;
  // Each slot's master's connection, filled as slots are used; emptied with the map.
  std::vector<std::shared_ptr<RedisConnection>> by_slot_;
};

}  // namespace statepact::detail
