// Core vocabulary types shared by every backend.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace statepact {

using Value = nlohmann::json;
using Token = std::uint64_t;
using Version = std::uint64_t;
using SessionId = std::uint64_t;

// Backend times are wall-clock times read from the backend's own clock (the server's, or the memory
// backend's injectable clock); they are never compared with the client's clock by the library.
using Clock = std::chrono::system_clock;
using time_point = Clock::time_point;
using std::chrono::milliseconds;

struct Lease {
  std::string resource;
  std::string owner;
  Token token = 0;
  time_point expires_at{};
  milliseconds ttl{0};

  // A local, optimistic check: the backend is the authority on expiry.
  bool is_expired(time_point now) const { return now >= expires_at; }
  bool operator==(const Lease&) const = default;
};

enum class Isolation { none, optimistic, snapshot, serializable, pessimistic };

inline const char* to_string(Isolation i) {
  switch (i) {
    case Isolation::none:
      return "none";
    case Isolation::optimistic:
      return "optimistic";
    case Isolation::snapshot:
      return "snapshot";
    case Isolation::serializable:
      return "serializable";
    case Isolation::pessimistic:
      return "pessimistic";
  }
  return "?";
}

// One key of a resource as stored: an absent value with a non-zero version is a tombstone
// ("erased at version v"); version 0 means the key was never written.
struct Entry {
  std::optional<Value> value;
  Version version = 0;
  bool operator==(const Entry&) const = default;
};

// A consistent copy of one resource; entries include tombstones so "absent since v" is known.
struct ResourceSnapshot {
  std::string resource;
  Version version = 0;
  std::map<std::string, Entry> entries;
};

// What storage enforces on every commit that writes a resource, set when the resource is
// registered and changeable later.
struct ResourcePolicy {
  // Every write must carry the resource's current fence token (SessionOptions::fence); storage
  // refuses one that does not with FenceRequiredError, atomically with the commit. Reads stay free.
  bool fence_required = false;
  bool operator==(const ResourcePolicy&) const = default;
};

struct CommitResult {
  std::map<std::string, Version> versions;  // new version of each written resource
  bool replayed = false;                    // true: an idempotent replay, nothing was applied
  bool operator==(const CommitResult&) const = default;
};

}  // namespace statepact
