// The outcomes of the lease, lock and read operations, in one vocabulary for every backend. The
// Redis scripts and the PostgreSQL functions answer with exactly these words; each server's codec
// reads a reply into one of the answers below, and the *_or_raise functions are the one place an
// outcome becomes the exception a caller sees. Commit refusals have their own table
// (commit_verdict.hpp), and why a renewal failed is a LeaseLoss (lease_rules.hpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <statepact/detail/lease_rules.hpp>
#include <statepact/detail/lock_errors.hpp>
#include <statepact/detail/names.hpp>
#include <statepact/errors.hpp>
#include <statepact/types.hpp>

namespace statepact::detail {

enum class Verdict {
  ok,                  // done as asked
  busy,                // acquire: another owner holds a live lease
  lost,                // renew: the lease is gone (a LeaseLoss says why)
  revoked,             // revoke: the current lease was ended and the fence moved past it
  none,                // revoke: there was no lease to end
  wait,                // lock: held by others (the Redis script names them; the client polls)
  resource_not_found,  // the resource is not registered
  deadlock,            // lock: waiting would close a wait cycle
  timeout,             // lock: not granted within the wait's timeout
  cancelled,           // lock: the wait was cancelled (by the caller or statement_timeout)
};

inline constexpr Named<Verdict> verdicts[] = {
    {Verdict::ok, "ok"},
    {Verdict::busy, "busy"},
    {Verdict::lost, "lost"},
    {Verdict::revoked, "revoked"},
    {Verdict::none, "none"},
    {Verdict::wait, "wait"},
    {Verdict::resource_not_found, "resource_not_found"},
    {Verdict::deadlock, "deadlock"},
    {Verdict::timeout, "timeout"},
    {Verdict::cancelled, "cancelled"},
};

template <>
struct WireNames<Verdict> {
  static constexpr const auto& table = verdicts;
};

// acquire: `lease` is the one taken (ok), or the other owner's live lease (busy).
struct AcquireAnswer {
  Verdict verdict = Verdict::ok;
  Lease lease;
};

inline Lease lease_or_raise(AcquireAnswer answer, const std::string& owner) {
  if (answer.verdict == Verdict::busy)
    throw LeaseNotAvailableError(answer.lease.resource, owner, answer.lease.owner,
                                 answer.lease.token, answer.lease.expires_at);
  return std::move(answer.lease);
}

// renew: the renewed lease (ok), or why it is gone and the resource's high-water mark (lost).
struct RenewAnswer {
  Verdict verdict = Verdict::ok;
  Lease lease;
  LeaseLoss loss = LeaseLoss::expired;
  Token high_water = 0;
};

// `asked` is the lease the caller tried to renew.
inline Lease renewed_or_raise(RenewAnswer answer, const Lease& asked) {
  if (answer.verdict == Verdict::lost) throw lease_lost(asked, answer.high_water, answer.loss);
  return std::move(answer.lease);
}

// read, snapshot, policy: the value (ok), or the resource that is not registered.
template <class T>
struct Found {
  Verdict verdict = Verdict::ok;
  T value{};
  std::string missing;  // resource_not_found: which resource

  static Found of(T value) {
    Found out;
    out.value = std::move(value);
    return out;
  }
  static Found not_registered(std::string resource) {
    Found out;
    out.verdict = Verdict::resource_not_found;
    out.missing = std::move(resource);
    return out;
  }
};

template <class T>
T found_or_raise(Found<T> answer) {
  if (answer.verdict == Verdict::resource_not_found) throw ResourceNotFoundError(answer.missing);
  return std::move(answer.value);
}

// lock: the key's entry once granted (ok); the holders waited for (wait); or why not.
struct LockAnswer {
  Verdict verdict = Verdict::ok;
  Entry entry;
  std::vector<std::string> holders;
};

// Returns the entry of a granted lock; raises resource_not_found, deadlock and timeout. `wait`
// and `cancelled` are the driver's to handle (poll again; the caller's own cancellation), so they
// are not passed here.
inline Entry entry_or_raise(LockAnswer answer, const std::string& resource, const std::string& key,
                            LockMode mode, milliseconds timeout) {
  switch (answer.verdict) {
    case Verdict::ok:
      return std::move(answer.entry);
    case Verdict::resource_not_found:
      throw ResourceNotFoundError(resource);
    case Verdict::deadlock:
      throw lock_deadlock(mode, resource, key);
    case Verdict::timeout:
      throw lock_timed_out(timeout, mode, resource, key);
    default:
      break;
  }
  throw Error(ErrorCode::backend_unavailable,
              fmt::format("lock on resource '{}' key '{}' ended with '{}', which the driver should "
                          "have handled",
                          resource, key, name_of(answer.verdict)));
}

}  // namespace statepact::detail
