// Why storage refused a commit, in one vocabulary for every backend. The names below are spelled
// the same in the Redis commit script, the PostgreSQL commit function and here, and raise() is the
// one place that turns a refusal into the exception a caller sees.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include <statepact/commit_request.hpp>
#include <statepact/detail/lease_rules.hpp>
#include <statepact/detail/names.hpp>
#include <statepact/errors.hpp>
#include <statepact/types.hpp>

namespace statepact::detail {

enum class CommitVerdict {
  idempotency_key_reused,  // the key came with a different fingerprint
  resource_not_found,      // `resource` is not registered
  fence,                   // `token` is not the high-water mark `high_water` of `resource`
  fence_required,          // `resource` requires a fence for writes, and the commit carried none
  conflict,                // `key` of `resource` is at version `found`, not `expected`
};

inline constexpr Named<CommitVerdict> commit_verdicts[] = {
    {CommitVerdict::idempotency_key_reused, "idempotency_key_reused"},
    {CommitVerdict::resource_not_found, "resource_not_found"},
    {CommitVerdict::fence, "fence"},
    {CommitVerdict::fence_required, "fence_required"},
    {CommitVerdict::conflict, "conflict"},
};

template <>
struct WireNames<CommitVerdict> {
  static constexpr const auto& table = commit_verdicts;
};

struct CommitRefusal {
  CommitVerdict verdict = CommitVerdict::conflict;
  std::string resource;
  std::string key;
  Version expected = 0;
  Version found = 0;
  Token token = 0;
  Token high_water = 0;

  static CommitRefusal key_reused() { return with(CommitVerdict::idempotency_key_reused, {}); }
  static CommitRefusal not_found(std::string resource) {
    return with(CommitVerdict::resource_not_found, std::move(resource));
  }
  static CommitRefusal bad_fence(std::string resource, Token token, Token high_water) {
    CommitRefusal r = with(CommitVerdict::fence, std::move(resource));
    r.token = token;
    r.high_water = high_water;
    return r;
  }
  static CommitRefusal no_fence(std::string resource) {
    return with(CommitVerdict::fence_required, std::move(resource));
  }
  static CommitRefusal conflict_on(std::string resource, std::string key, Version expected,
                                   Version found) {
    CommitRefusal r = with(CommitVerdict::conflict, std::move(resource));
    r.key = std::move(key);
    r.expected = expected;
    r.found = found;
    return r;
  }

 private:
  static CommitRefusal with(CommitVerdict v, std::string resource) {
    CommitRefusal r;
    r.verdict = v;
    r.resource = std::move(resource);
    return r;
  }
};

// Throws the error a refusal stands for; nothing was applied in any case.
[[noreturn]] inline void raise(const CommitRefusal& r, const CommitRequest& req) {
  switch (r.verdict) {
    case CommitVerdict::idempotency_key_reused:
      throw IdempotencyKeyReusedError(req.idempotency_key.value_or(""));
    case CommitVerdict::resource_not_found:
      throw ResourceNotFoundError(r.resource);
    case CommitVerdict::fence:
      enforce_fence(r.resource, req.agent_id, r.high_water, r.token);
      // Storage and client disagree on the rule itself: a broken server-side script or function.
      throw Error(ErrorCode::backend_unavailable,
                  fmt::format("storage refused fence token {} for resource '{}' although it is the "
                              "high-water mark; nothing was applied",
                              r.token, r.resource));
    case CommitVerdict::fence_required:
      throw FenceRequiredError(r.resource, req.agent_id);
    case CommitVerdict::conflict:
      throw ConflictError(r.resource, r.key, r.expected, r.found);
  }
  throw Error(ErrorCode::backend_unavailable, "storage refused the commit for an unknown reason");
}

// What storage answered a commit: applied (or replayed), or refused.
using CommitAnswer = std::variant<CommitResult, CommitRefusal>;

inline CommitResult result_or_raise(CommitAnswer answer, const CommitRequest& req) {
  if (const auto* refusal = std::get_if<CommitRefusal>(&answer)) raise(*refusal, req);
  return std::get<CommitResult>(std::move(answer));
}

}  // namespace statepact::detail
