// The lease and fencing rules as pure decisions on one resource's lease state. They do
// no I/O and read no clock: the backend passes its own `now`. The memory backend applies them under
// its mutex; the SQL and Lua implementations of the other backends follow the same table.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <statepact/detail/names.hpp>
#include <statepact/errors.hpp>
#include <statepact/types.hpp>

namespace statepact::detail {

struct LeaseRecord {
  std::string owner;
  Token token = 0;
  time_point expires_at{};
  milliseconds ttl{0};
};

// What storage keeps per resource. `high_water` is the highest token ever issued; it survives
// release and expiry, so tokens are never reused.
struct LeaseState {
  Token high_water = 0;
  std::optional<LeaseRecord> current;  // empty: never leased, or released

  bool live_at(time_point now) const { return current && now < current->expires_at; }
};

inline Lease to_lease(const std::string& resource, const LeaseRecord& r) {
  return Lease{resource, r.owner, r.token, r.expires_at, r.ttl};
}

// acquire: free/released/expired -> next token; live and same owner -> extend, same token;
// live and another owner -> LeaseNotAvailableError. Mutates `state` only on success.
inline Lease decide_acquire(LeaseState& state, const std::string& resource,
                            const std::string& owner, milliseconds ttl, time_point now) {
  if (state.live_at(now)) {
    if (state.current->owner != owner)
      throw LeaseNotAvailableError(resource, owner, state.current->owner, state.current->token,
                                   state.current->expires_at);
    state.current->expires_at = now + ttl;
    state.current->ttl = ttl;
    return to_lease(resource, *state.current);
  }
  state.current = LeaseRecord{owner, state.high_water + 1, now + ttl, ttl};
  state.high_water = state.current->token;
  return to_lease(resource, *state.current);
}

// Why a renewal found its lease gone. The names are the words the Redis renew script and the
// PostgreSQL renew function answer with; lease_lost() is the one place that turns one into the
// error and its message.
enum class LeaseLoss {
  none,        // the resource never had a lease
  superseded,  // a newer token was issued
  released,    // released (or revoked) and not taken over
  expired,     // still the stored lease, but past its expiry
};

inline constexpr Named<LeaseLoss> lease_losses[] = {
    {LeaseLoss::none, "none"},
    {LeaseLoss::superseded, "superseded"},
    {LeaseLoss::released, "released"},
    {LeaseLoss::expired, "expired"},
};

template <>
struct WireNames<LeaseLoss> {
  static constexpr const auto& table = lease_losses;
};

inline LeaseLostError lease_lost(const Lease& lease, Token high_water, LeaseLoss why) {
  const char* reason = "lease expired before renewal";
  switch (why) {
    case LeaseLoss::none:
      reason = "no lease exists";
      break;
    case LeaseLoss::superseded:
      reason = "superseded by a newer token";
      break;
    case LeaseLoss::released:
      reason = "lease was released";
      break;
    case LeaseLoss::expired:
      break;
  }
  return LeaseLostError(lease.resource, lease.owner, lease.token, high_water, reason);
}

// renew: only the stored lease itself (same owner and token), and only while it is live.
inline Lease decide_renew(LeaseState& state, const Lease& lease, milliseconds ttl, time_point now) {
  if (!state.current || state.current->token != lease.token || state.current->owner != lease.owner)
    throw lease_lost(lease, state.high_water,
                     lease.token < state.high_water ? LeaseLoss::superseded : LeaseLoss::released);
  if (!state.live_at(now)) throw lease_lost(lease, state.high_water, LeaseLoss::expired);
  state.current->expires_at = now + ttl;
  state.current->ttl = ttl;
  return to_lease(lease.resource, *state.current);
}

// release: true only for the current owner's own lease; the high-water mark stays.
inline bool decide_release(LeaseState& state, const Lease& lease) {
  if (!state.current || state.current->token != lease.token || state.current->owner != lease.owner)
    return false;
  state.current.reset();
  return true;
}

enum class FenceVerdict { ok, stale, never_issued };

inline FenceVerdict check_fence(Token high_water, Token token) {
  if (token < high_water) return FenceVerdict::stale;
  if (token > high_water || token == 0) return FenceVerdict::never_issued;
  return FenceVerdict::ok;
}

// Turns a failed verdict of a commit's fence into its error; `agent_id` is the session's agent.
inline void enforce_fence(const std::string& resource, const std::string& agent_id,
                          Token high_water, Token token) {
  switch (check_fence(high_water, token)) {
    case FenceVerdict::ok:
      return;
    case FenceVerdict::stale:
      throw LeaseLostError::fenced_commit(resource, agent_id, token, high_water);
    case FenceVerdict::never_issued:
      throw InvalidArgumentError(
          fmt::format("fence token {} for resource '{}' was never issued (highest issued is {})",
                      token, resource, high_water));
  }
}

}  // namespace statepact::detail
