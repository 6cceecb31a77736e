// Which cluster slot a resource's keys live in, and the refusal of a request whose resources do
// not share one: a cluster runs a script only when all its keys are in one slot. Pure, so the rule
// and its message are tested without a cluster.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include <statepact/errors.hpp>

#include "key_layout.hpp"
#include "slot.hpp"

namespace statepact::detail {

inline int resource_slot(std::string_view resource) {
  return crc16(KeyLayout::slot_tag(resource)) & (cluster_slot_count - 1);
}

// Whether the resources live in more than one slot (on a cluster, no one script can touch them).
inline bool spans_slots(const std::vector<std::string>& resources) {
  for (const auto& r : resources)
    if (resource_slot(r) != resource_slot(resources.front())) return true;
  return false;
}

// Throws InvalidArgumentError naming the first resource in another slot than the first one's;
// `what` names the request ("the commit"). Nothing has been sent when it throws.
inline void require_one_slot(std::string_view what, const std::vector<std::string>& resources) {
  if (resources.empty()) return;
  const int first = resource_slot(resources.front());
  for (const auto& r : resources) {
    const int slot = resource_slot(r);
    if (slot == first) continue;
    throw InvalidArgumentError(fmt::format(
        "redis cluster: {} spans hash slots ('{}' is in slot {}, '{}' in slot {}), and on a Redis "
        "Cluster one request cannot; nothing was sent. Resources used together must share a "
        "group, the part of their names in braces: e.g. '{{order-17}}/items' and "
        "'{{order-17}}/payment' (docs/backends/redis.md, \"Co-location\")",
        what, resources.front(), first, r, slot));
  }
}

}  // namespace statepact::detail
