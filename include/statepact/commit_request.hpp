// What a session hands its backend at commit: everything storage must check and apply atomically.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <statepact/types.hpp>

namespace statepact {

// A key whose version storage must still find at commit; 0 means "never written".
struct ReadCheck {
  std::string resource;
  std::string key;
  Version expected_version = 0;
};

struct WriteOp {
  std::string resource;
  std::string key;
  std::optional<Value> value;  // empty: erase (leaves a tombstone)
};

struct FenceCheck {
  std::string resource;
  Token token = 0;
};

struct CommitRequest {
  SessionId session = 0;  // whose pessimistic locks to release once committed
  std::string agent_id;
  std::vector<std::string> resources;  // every resource of the session; all must exist
  std::vector<FenceCheck> fences;
  std::vector<ReadCheck> checks;
  std::vector<WriteOp> writes;
  std::optional<std::string> idempotency_key;
  std::string fingerprint;  // of (resources, writes): tells a replay from a reuse of the key
};

enum class LockMode { shared, exclusive };

}  // namespace statepact
