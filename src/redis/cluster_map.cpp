#include "cluster_map.hpp"

#include <fmt/format.h>

#include <statepact/errors.hpp>

namespace statepact::detail {
namespace {

[[noreturn]] void malformed_slots_entry(std::size_t entry, const char* what) {
  throw Error(
      ErrorCode::backend_unavailable,
      fmt::format("redis: the CLUSTER SLOTS reply cannot be read (entry {}: {})", entry, what));
}

ClusterNode read_node(const RedisReply& r, std::size_t entry, const std::string& answered_by) {
  if (r.type != RedisReply::Type::array || r.elements.size() < 2)
    malformed_slots_entry(entry, "a node is not an array of at least host and port");
  const auto& host = r.elements[0];
  const auto& port = r.elements[1];
  if (host.type != RedisReply::Type::string || port.type != RedisReply::Type::integer)
    malformed_slots_entry(entry, "a node's host is not a string or its port not an integer");
  if (port.integer < 1 || port.integer > 65535)
    malformed_slots_entry(entry, "a node's port is out of range");
  // "?" is how a node says its address is unknown for the endpoint type asked: unroutable.
  if (host.str == "?") malformed_slots_entry(entry, "a node's address is unknown ('?')");
  ClusterNode node;
  node.host = host.str.empty() ? answered_by : host.str;
  node.port = static_cast<int>(port.integer);
  if (r.elements.size() > 2 && r.elements[2].type == RedisReply::Type::string)
    node.id = r.elements[2].str;
  return node;
}

}  // namespace

ClusterMap ClusterMap::from_slots_reply(const RedisReply& reply,
                                        const std::string& answered_by_host) {
  if (reply.type != RedisReply::Type::array)
    throw Error(ErrorCode::backend_unavailable,
                "redis: the CLUSTER SLOTS reply cannot be read (it is not an array)");
  ClusterMap map;
  for (std::size_t e = 0; e < reply.elements.size(); ++e) {
    const auto& range = reply.elements[e];
    if (range.type != RedisReply::Type::array || range.elements.size() < 3)
      malformed_slots_entry(e, "not an array of first slot, last slot and master");
    const auto& first = range.elements[0];
    const auto& last = range.elements[1];
    if (first.type != RedisReply::Type::integer || last.type != RedisReply::Type::integer)
      malformed_slots_entry(e, "a slot bound is not an integer");
    if (first.integer < 0 || last.integer >= cluster_slot_count || first.integer > last.integer)
      malformed_slots_entry(e, "the slot range is out of bounds");
    const auto master = map.index_of(read_node(range.elements[2], e, answered_by_host));
    for (std::size_t r = 3; r < range.elements.size(); ++r) {
      auto replica = read_node(range.elements[r], e, answered_by_host);
      auto& known = map.replicas_[master];
      bool seen = false;
      for (const auto& k : known) seen = seen || k.same_address(replica);
      if (!seen) known.push_back(std::move(replica));
    }
    for (auto s = first.integer; s <= last.integer; ++s) {
      if (map.owner_[s] != none && map.owner_[s] != master)
        malformed_slots_entry(e, "a slot is claimed by two masters");
      map.owner_[s] = static_cast<std::uint16_t>(master);
    }
  }
  return map;
}

std::size_t ClusterMap::index_of(const ClusterNode& node) {
  for (std::size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].same_address(node)) {
      if (nodes_[i].id.empty()) nodes_[i].id = node.id;
      return i;
    }
  nodes_.push_back(node);
  replicas_.emplace_back();
  return nodes_.size() - 1;
}

const ClusterNode* ClusterMap::master_of(int slot) const {
  if (slot < 0 || slot >= cluster_slot_count || owner_[slot] == none) return nullptr;
  return &nodes_[owner_[slot]];
}

std::vector<ClusterNode> ClusterMap::replicas_of(int slot) const {
  if (slot < 0 || slot >= cluster_slot_count || owner_[slot] == none) return {};
  return replicas_[owner_[slot]];
}

std::vector<ClusterNode> ClusterMap::masters() const {
  std::vector<ClusterNode> out;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    bool serves = false;
    for (auto o : owner_) serves = serves || o == i;
    if (serves) out.push_back(nodes_[i]);
  }
  return out;
}

int ClusterMap::unserved_slots() const {
  int n = 0;
  for (auto o : owner_) n += o == none;
  return n;
}

bool ClusterMap::move(int slot, const ClusterNode& master) {
  if (slot < 0 || slot >= cluster_slot_count) return false;
  const auto to = index_of(master);
  if (owner_[slot] == to) return false;
  owner_[slot] = static_cast<std::uint16_t>(to);
  return true;
}

}  // namespace statepact::detail
