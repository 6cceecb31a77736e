// What an operator does to the test cluster (scripts/servers/redis_cluster.sh) behind the
// backend's back: find who serves a slot, migrate a slot, fail a master over, kill and restart a
// node, and wait until the cluster is whole again.
#pragma once

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "redis_admin.hpp"

namespace statepact::test {

struct ClusterNodeInfo {
  std::string id;
  int port = 0;
  bool master = false;
  std::string master_id;  // a replica's master
  std::vector<std::pair<int, int>> slots;

  bool serves(int slot) const {
    for (auto [a, b] : slots)
      if (slot >= a && slot <= b) return true;
    return false;
  }
};

class ClusterAdmin {
 public:
  static std::vector<int> ports() {
    const char* p = std::getenv("STATEPACT_TEST_REDIS_CLUSTER_PORTS");
    if (!p || !*p)
      throw std::runtime_error(
          "STATEPACT_TEST_REDIS_CLUSTER_PORTS is not set: start the cluster with "
          "scripts/servers/redis_cluster.sh");
    std::istringstream in(p);
    std::vector<int> out;
    for (int port; in >> port;) out.push_back(port);
    return out;
  }

  // CLUSTER NODES as the first node that answers sees it.
  static std::vector<ClusterNodeInfo> nodes() {
    for (int port : ports()) {
      std::string text;
      try {
        RedisAdmin a(port);
        text = a.command({"CLUSTER", "NODES"});
      } catch (const std::exception&) {
        continue;
      }
      std::vector<ClusterNodeInfo> out;
      std::istringstream lines(text);
      for (std::string line; std::getline(lines, line);) {
        std::istringstream f(line);
        ClusterNodeInfo n;
        std::string addr, flags, master, ping, pong, epoch, state;
        f >> n.id >> addr >> flags >> master >> ping >> pong >> epoch >> state;
        if (flags.find("fail") != std::string::npos || flags.find("noaddr") != std::string::npos)
          continue;
        n.port = std::stoi(addr.substr(addr.rfind(':') + 1, addr.find('@') - addr.rfind(':') - 1));
        n.master = flags.find("master") != std::string::npos;
        if (master != "-") n.master_id = master;
        for (std::string range; f >> range;) {
          if (range.front() == '[') continue;  // a slot being migrated or imported
          const auto dash = range.find('-');
          const int a = std::stoi(range.substr(0, dash));
          const int b = dash == std::string::npos ? a : std::stoi(range.substr(dash + 1));
          n.slots.emplace_back(a, b);
        }
        out.push_back(std::move(n));
      }
      return out;
    }
    throw std::runtime_error("no cluster node answers CLUSTER NODES");
  }

  static ClusterNodeInfo master_of(int slot) {
    for (auto& n : nodes())
      if (n.master && n.serves(slot)) return n;
    throw std::runtime_error(fmt::format("no master serves slot {}", slot));
  }

  // Polls for a while: after a failover, the node asked may still show the old pairing.
  static ClusterNodeInfo replica_of(const ClusterNodeInfo& master) {
    for (int i = 0; i < 200; ++i) {
      for (auto& n : nodes())
        if (!n.master && n.master_id == master.id) return n;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    throw std::runtime_error(fmt::format("master {} has no replica", master.port));
  }

  static ClusterNodeInfo other_master(const ClusterNodeInfo& than) {
    for (auto& n : nodes())
      if (n.master && n.id != than.id && !n.slots.empty()) return n;
    throw std::runtime_error("no other master");
  }

  // `f` on every master, for SETSLOT NODE (every master must learn the new owner).
  template <class F>
  static void each_master(F f) {
    for (auto& n : nodes())
      if (n.master) f(n);
  }

  // CLUSTER GETKEYSINSLOT on one node.
  static std::vector<std::string> keys_in_slot(int port, int slot) {
    redisContext* c = redisConnect("127.0.0.1", port);
    if (!c || c->err) throw std::runtime_error("cannot connect to a cluster node");
    auto* r = static_cast<redisReply*>(redisCommand(c, "CLUSTER GETKEYSINSLOT %d 1000", slot));
    std::vector<std::string> keys;
    if (r && r->type == REDIS_REPLY_ARRAY)
      for (std::size_t i = 0; i < r->elements; ++i)
        keys.emplace_back(r->element[i]->str, r->element[i]->len);
    if (r) freeReplyObject(r);
    redisFree(c);
    return keys;
  }

  // A field of INFO commandstats: how often the node ran `command` ("asking", "evalsha").
  static long long calls(int port, const std::string& command) {
    RedisAdmin a(port);
    const auto stats = a.command({"INFO", "commandstats"});
    const auto at = stats.find("cmdstat_" + command + ":calls=");
    if (at == std::string::npos) return 0;
    return std::stoll(stats.substr(at + command.size() + 15));
  }

  // Whether the node on `port` is a master now.
  static bool is_master(int port) {
    try {
      RedisAdmin a(port);
      return a.command({"INFO", "replication"}).find("role:master") != std::string::npos;
    } catch (const std::exception&) {
      return false;
    }
  }

  // Kills a node with SIGKILL (nothing flushed), by its pid file.
  static void kill(int port) {
    const auto pid = read_pid(port);
    if (pid <= 0 || ::kill(pid, SIGKILL) != 0)
      throw std::runtime_error(fmt::format("cannot kill the node on port {}", port));
    for (int i = 0; i < 500 && ::kill(pid, 0) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  // Starts a node again with the command its start script saved; it rejoins as it was configured.
  static void restart(int port) {
    const auto cmd = fmt::format("bash '{}/{}/start.sh'", dir(), port);
    if (std::system(cmd.c_str()) != 0)
      throw std::runtime_error(fmt::format("cannot restart the node on port {}", port));
  }

  // Until every node is up, sees 3 masters that serve every slot and 3 replicas linked to them,
  // no node still flags another as failed, and every node's CLUSTER SLOTS names all six. A node
  // brought back is linked to its master before the others clear its flag, and a replica is left
  // out of a node's CLUSTER SLOTS until gossip tells that node it has replicated something.
  static void wait_whole(std::chrono::seconds limit = std::chrono::seconds(30)) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      if (whole()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    throw std::runtime_error("the test cluster did not become whole again");
  }

 private:
  // How many distinct nodes the CLUSTER SLOTS reply of the node on `port` names.
  static std::size_t slot_map_ports(int port) {
    redisContext* c = redisConnect("127.0.0.1", port);
    if (!c || c->err) {
      if (c) redisFree(c);
      throw std::runtime_error("cannot connect to a cluster node");
    }
    auto* r = static_cast<redisReply*>(redisCommand(c, "CLUSTER SLOTS"));
    std::set<long long> seen;
    if (r && r->type == REDIS_REPLY_ARRAY)
      for (std::size_t i = 0; i < r->elements; ++i) {
        const redisReply* range = r->element[i];
        for (std::size_t j = 2; range->type == REDIS_REPLY_ARRAY && j < range->elements; ++j) {
          const redisReply* node = range->element[j];
          if (node->type == REDIS_REPLY_ARRAY && node->elements >= 2 &&
              node->element[1]->type == REDIS_REPLY_INTEGER)
            seen.insert(node->element[1]->integer);
        }
      }
    if (r) freeReplyObject(r);
    redisFree(c);
    return seen.size();
  }

  static bool whole() {
    try {
      int masters = 0, linked = 0;
      for (int port : ports()) {
        RedisAdmin a(port);
        if (a.command({"CLUSTER", "INFO"}).find("cluster_state:ok") == std::string::npos)
          return false;
        std::istringstream lines(a.command({"CLUSTER", "NODES"}));
        int known = 0;
        for (std::string line; std::getline(lines, line);) {
          if (line.empty()) continue;
          ++known;
          std::istringstream fields(line);
          std::string id, address, flags;
          fields >> id >> address >> flags;
          if (flags.find("fail") != std::string::npos ||
              flags.find("handshake") != std::string::npos)
            return false;
        }
        if (known != static_cast<int>(ports().size())) return false;
        if (slot_map_ports(port) != ports().size()) return false;
        const auto repl = a.command({"INFO", "replication"});
        if (repl.find("role:master") != std::string::npos) ++masters;
        if (repl.find("master_link_status:up") != std::string::npos) ++linked;
      }
      return masters == 3 && linked == 3;
    } catch (const std::exception&) {
      return false;
    }
  }

  static std::string dir() {
    const char* d = std::getenv("STATEPACT_TEST_REDIS_CLUSTER_DIR");
    if (!d || !*d) throw std::runtime_error("STATEPACT_TEST_REDIS_CLUSTER_DIR is not set");
    return d;
  }

  static pid_t read_pid(int port) {
    std::ifstream in(fmt::format("{}/{}/redis.pid", dir(), port));
    pid_t p = 0;
    in >> p;
    return p;
  }
};

}  // namespace statepact::test
