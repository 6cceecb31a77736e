/// @file
/// What a session hands its backend at commit: everything storage must check and apply atomically.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <statepact/types.hpp>

namespace statepact {

/// A key whose version storage must still find at commit; 0 means "never written".
/// A mismatch refuses the commit with ConflictError.
struct ReadCheck {
  std::string resource;          ///< The key's resource.
  std::string key;               ///< The key.
  Version expected_version = 0;  ///< The version the session saw; 0: the key was never written.
};

/// One buffered write or erase, applied at commit.
struct WriteOp {
  std::string resource;        ///< The key's resource.
  std::string key;             ///< The key.
  std::optional<Value> value;  ///< The new value; empty: erase (leaves a tombstone).
};

/// A fence token the commit carries for one resource: storage refuses the commit with
/// LeaseLostError if the resource's fence (highest token issued) is newer.
struct FenceCheck {
  std::string resource;  ///< The fenced resource.
  Token token = 0;       ///< The lease token; 0 was never issued and is refused.
};

/// What a Session hands its backend's commit(): everything storage must check and apply in one
/// atomic step. Built by Session::commit(); a backend checks a hand-built one before any I/O.
struct CommitRequest {
  SessionId session = 0;               ///< Whose pessimistic locks to release once committed.
  std::string agent_id;                ///< The committing agent, named in fencing errors.
  std::vector<std::string> resources;  ///< Every resource of the session; all must exist.
  std::vector<FenceCheck> fences;      ///< At most one token per resource.
  std::vector<ReadCheck> checks;       ///< What the isolation mode validates.
  std::vector<WriteOp> writes;         ///< What to apply if every check passes.
  std::optional<std::string> idempotency_key;  ///< Set: an identical resend is a replay.
  std::string fingerprint;  ///< Of (resources, writes): tells a replay from a reuse of the key.
};

/// A pessimistic session's lock on one key.
enum class LockMode {
  shared,    ///< Taken by read(); compatible with other shared locks.
  exclusive  ///< Taken by write(), erase() and read_for_update(); compatible with nothing.
};

}  // namespace statepact
