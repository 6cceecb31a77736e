/// @file
/// Core vocabulary types shared by every backend.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace statepact {

/// A stored value: any JSON value (finite numbers; strings of valid UTF-8 without U+0000; at most
/// 100 levels deep and 1 MiB of JSON text).
using Value = nlohmann::json;
/// A fencing token: grows by one with every new owner of a resource's lease, never reused; 0 was
/// never issued.
using Token = std::uint64_t;
/// A resource's version (the number of commits that wrote it), or the version at which a key was
/// last written or erased; 0 means never written.
using Version = std::uint64_t;
/// A backend's id for an open session.
using SessionId = std::uint64_t;

/// Backend times are wall-clock times read from the backend's own clock (the server's, or the
/// memory backend's injectable clock); they are never compared with the client's clock by the
/// library.
using Clock = std::chrono::system_clock;
/// A time on the backend's clock (see Clock).
using time_point = Clock::time_point;
using std::chrono::milliseconds;

/// A lease as storage granted it: who owns a long-running job on a resource, with the fencing
/// token that storage checks at commit. A plain value: storage identifies the lease by resource,
/// owner and token, so an older copy still works for renew and release while the lease lives.
struct Lease {
  std::string resource;     ///< The resource the lease is on.
  std::string owner;        ///< Who holds it.
  Token token = 0;          ///< The fencing token; unchanged by renewals.
  time_point expires_at{};  ///< When it expires, by the backend's clock.
  milliseconds ttl{0};      ///< The ttl it was granted or last renewed with.

  /// A local, optimistic check: the backend is the authority on expiry. `now` must be a time on
  /// the backend's clock for the answer to mean anything.
  bool is_expired(time_point now) const { return now >= expires_at; }
  /// Memberwise equality.
  bool operator==(const Lease&) const = default;
};

/// What a session's reads see and what its commit validates (docs/isolation.md).
enum class Isolation {
  none,          ///< Reads the latest values; commit validates nothing (last writer wins).
  optimistic,    ///< Reads the latest values; commit checks every key read is unchanged (default).
  snapshot,      ///< Reads one consistent snapshot; commit checks only the keys written.
  serializable,  ///< Reads one consistent snapshot; commit checks every key read or written.
  pessimistic    ///< Locks keys as it goes (shared on read, exclusive on write or
                 ///< read_for_update), held to commit or abort; commit re-checks the keys read.
};

/// The mode's name, as written in the enum ("none", "optimistic", ...).
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

/// One key of a resource as stored: an absent value with a non-zero version is a tombstone
/// ("erased at version v"); version 0 means the key was never written.
struct Entry {
  std::optional<Value> value;  ///< The value; empty if never written or erased.
  Version version = 0;  ///< The resource version at which the key was last written or erased.
  /// Memberwise equality.
  bool operator==(const Entry&) const = default;
};

/// A consistent copy of one resource; entries include tombstones so "absent since v" is known.
struct ResourceSnapshot {
  std::string resource;                  ///< The resource's name.
  Version version = 0;                   ///< Its version when the copy was taken.
  std::map<std::string, Entry> entries;  ///< Every key, tombstones included.
};

/// What storage enforces on every commit that writes a resource, set when the resource is
/// registered and changeable later.
struct ResourcePolicy {
  /// Every write must carry the resource's current fence token (SessionOptions::fence); storage
  /// refuses one that does not with FenceRequiredError, atomically with the commit. Reads stay
  /// free.
  bool fence_required = false;
  /// Memberwise equality.
  bool operator==(const ResourcePolicy&) const = default;
};

/// What a successful commit (or a replay of one) answers.
struct CommitResult {
  std::map<std::string, Version> versions;  ///< New version of each written resource.
  bool replayed = false;  ///< True: an idempotent replay, nothing was applied by this call.
  /// Memberwise equality.
  bool operator==(const CommitResult&) const = default;
};

}  // namespace statepact
