// Which master serves each of a Redis Cluster's 16384 slots, read from a `CLUSTER SLOTS` reply and
// corrected by MOVED redirections. Pure (no I/O), so discovery and routing decisions are tested
// against canned replies.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reply.hpp"
#include "slot.hpp"

namespace statepact::detail {

struct ClusterNode {
  std::string host;
  int port = 0;
  std::string id;  // empty when the reply did not name it (MOVED names only an address)

  // Nodes are told apart by address: that is what a MOVED names and what a connection dials.
  bool same_address(const ClusterNode& o) const { return host == o.host && port == o.port; }
};

class ClusterMap {
 public:
  // Reads `CLUSTER SLOTS`: one entry per slot range, `[first, last, master, replica...]`, each node
  // `[host, port, id, ...]`. A node whose host is empty does not know its own address; it is the
  // one that answered, at `answered_by_host`. Throws statepact::Error naming the entry when the
  // reply is not of that shape, so a foreign or broken server is never routed to by guesswork.
  static ClusterMap from_slots_reply(const RedisReply& reply, const std::string& answered_by_host);

  // The master serving `slot`, or null when no node serves it (the cluster is incomplete).
  const ClusterNode* master_of(int slot) const;
  // The replicas of `slot`'s master, as the last full map listed them.
  std::vector<ClusterNode> replicas_of(int slot) const;
  // Every master, once each, in the order first seen.
  std::vector<ClusterNode> masters() const;
  // Slots no node serves.
  int unserved_slots() const;

  // A MOVED redirection: `slot` is served by `master` from now on. Returns false (and changes
  // nothing) when the map already said so, which means the cluster disagrees with itself for the
  // moment (the caller refreshes the whole map instead of looping).
  bool move(int slot, const ClusterNode& master);

 private:
  static constexpr std::uint16_t none = 0xFFFF;
  std::size_t index_of(const ClusterNode& node);

  std::vector<std::uint16_t> owner_ = std::vector<std::uint16_t>(cluster_slot_count, none);
  std::vector<ClusterNode> nodes_;                  // masters, by index
  std::vector<std::vector<ClusterNode>> replicas_;  // per master index
};

}  // namespace statepact::detail
