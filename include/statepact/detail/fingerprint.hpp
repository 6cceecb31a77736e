// A commit's fingerprint: what an idempotent replay must match. Built from the session's resources
// and its writes in a canonical order, so the same logical commit always yields the same string.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <statepact/commit_request.hpp>

namespace statepact::detail {

inline std::uint64_t fnv1a64(const std::string& s, std::uint64_t seed) {
  std::uint64_t h = seed;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// Two independent 64-bit hashes of the canonical JSON: short to store, collisions negligible.
inline std::string fingerprint(std::vector<std::string> resources, std::vector<WriteOp> writes) {
  std::sort(resources.begin(), resources.end());
  std::sort(writes.begin(), writes.end(), [](const WriteOp& a, const WriteOp& b) {
    return a.resource != b.resource ? a.resource < b.resource : a.key < b.key;
  });
  Value doc = Value::object();
  doc["resources"] = resources;
  Value w = Value::array();
  for (const auto& op : writes)
    w.push_back(
        Value::array({op.resource, op.key, op.value ? *op.value : Value(), op.value.has_value()}));
  doc["writes"] = std::move(w);
  const std::string canonical = doc.dump();
  return fmt::format("{:016x}{:016x}", fnv1a64(canonical, 0xcbf29ce484222325ULL),
                     fnv1a64(canonical, 0x84222325cbf29ce4ULL));
}

}  // namespace statepact::detail
