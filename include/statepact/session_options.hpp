/// @file
/// What a session is for: who, which resources, which isolation, which fence. A non-aggregate with
/// chainable setters, because g++ 12 mishandles braced lists and aggregate temporaries in co_await.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <statepact/commit_request.hpp>
#include <statepact/errors.hpp>
#include <statepact/types.hpp>

namespace statepact {

/// What a session is for: who, which resources, which isolation, which fences, which idempotency
/// key, how long a lock may wait. Chainable setters that only record; normalize() (called by
/// Manager::session() and Manager::run()) checks it all before any I/O. A plain value, reusable
/// for many sessions.
class SessionOptions {
 public:
  /// Options for agent `agent_id` (a name: 1 to 256 bytes of UTF-8 without control characters,
  /// checked by normalize()). Defaults: no resource yet, optimistic, no fence, no idempotency key,
  /// lock_timeout 5 s.
  explicit SessionOptions(std::string agent_id) : agent_id_(std::move(agent_id)) {}

  /// Adds a resource to the session (at least one is needed; duplicates are dropped).
  SessionOptions& resource(std::string name) {
    resources_.push_back(std::move(name));
    normalized_ = false;
    return *this;
  }
  /// Adds several resources.
  SessionOptions& resources(const std::vector<std::string>& names) {
    resources_.insert(resources_.end(), names.begin(), names.end());
    normalized_ = false;
    return *this;
  }
  /// The isolation mode (default: optimistic).
  SessionOptions& isolation(Isolation i) {
    isolation_ = i;
    normalized_ = false;
    return *this;
  }
  /// A fence token for a single-resource session: normalize() assigns it to the session's only
  /// resource (InvalidArgumentError if there are several, or if the token is 0).
  SessionOptions& fence(Token token) {
    pending_token_ = token;
    normalized_ = false;
    return *this;
  }
  /// Fences the session's commit on `resource` (one of its resources) with a lease token: storage
  /// refuses the commit with LeaseLostError if a newer token was issued for it, and a
  /// fence-required resource can be written only with one. Two different tokens for one resource
  /// are an InvalidArgumentError at normalize(); the same token twice is kept once.
  SessionOptions& fence(std::string resource, Token token) {
    fences_.push_back(FenceCheck{std::move(resource), token});
    normalized_ = false;
    return *this;
  }
  /// fence(lease.resource, lease.token).
  SessionOptions& fence(const Lease& lease) { return fence(lease.resource, lease.token); }
  /// Makes the commit idempotent: storage applies a commit with this key once, and answers an
  /// identical one (same key, resources and writes) with the stored result (`replayed`) for its
  /// idempotency retention; a different commit with the key is an IdempotencyKeyReusedError.
  /// Also what makes a CommitUnknownError resendable (Session::resend_commit(), Manager::run()).
  SessionOptions& idempotency_key(std::string key) {
    idempotency_key_ = std::move(key);
    normalized_ = false;
    return *this;
  }
  /// How long a pessimistic session waits for each lock before LockTimeoutError (default 5 s;
  /// 1 ms to 1 hour).
  SessionOptions& lock_timeout(milliseconds d) {
    lock_timeout_ = d;
    normalized_ = false;
    return *this;
  }

  /// The agent id.
  const std::string& agent_id() const { return agent_id_; }
  /// The resources as added; sorted and without duplicates once normalized.
  const std::vector<std::string>& resources() const { return resources_; }
  /// The isolation mode.
  Isolation isolation() const { return isolation_; }
  /// The fences given per resource; sorted by resource, and with fence(token) resolved, once
  /// normalized.
  const std::vector<FenceCheck>& fences() const { return fences_; }
  /// The idempotency key, if any.
  const std::optional<std::string>& idempotency_key() const { return idempotency_key_; }
  /// The lock wait bound.
  milliseconds lock_timeout() const { return lock_timeout_; }

  /// Checks everything that needs no I/O, sorts and dedupes the resources and resolves a bare token
  /// to the single resource. Does nothing if already normalized and unchanged since.
  /// @throws InvalidArgumentError for a bad name, no resource, a fence on a resource not of the
  ///         session, token 0, two tokens for one resource, fence(token) with several resources,
  ///         or a lock_timeout out of range; the options are then left unchanged.
  void normalize();
  /// A normalized copy; throws as normalize(), leaving this unchanged.
  SessionOptions normalized() const;

 private:
  std::string agent_id_;
  std::vector<std::string> resources_;
  Isolation isolation_ = Isolation::optimistic;
  std::optional<Token> pending_token_;
  std::vector<FenceCheck> fences_;
  std::optional<std::string> idempotency_key_;
  milliseconds lock_timeout_{5000};
  bool normalized_ =
      false;  // set by normalize(), cleared by every setter: a reused value is checked once
};

}  // namespace statepact

#include <statepact/detail/validate.hpp>

namespace statepact {

inline void SessionOptions::normalize() {
  if (normalized_) return;
  // Every check runs before anything is changed, so a throw leaves the options as they were.
  detail::validate_name("agent id", agent_id_);
  if (resources_.empty())
    throw InvalidArgumentError(fmt::format(
        "session of agent '{}' names no resource; add one with .resource(name)", agent_id_));
  for (const auto& r : resources_) detail::validate_name("resource name", r);
  auto named = [&](const std::string& r) {
    return std::find(resources_.begin(), resources_.end(), r) != resources_.end();
  };
  const bool single = std::all_of(resources_.begin(), resources_.end(),
                                  [&](const std::string& r) { return r == resources_.front(); });
  if (pending_token_ && !single)
    throw InvalidArgumentError(
        "fence(token) needs a single-resource session, but this one has several resources; use "
        "fence(resource, token)");
  for (const auto& f : fences_) {
    if (!named(f.resource))
      throw InvalidArgumentError(
          fmt::format("fence names resource '{}', which is not one of the session's", f.resource));
    if (f.token == 0) throw InvalidArgumentError("fence token 0 was never issued");
    const bool clash = std::any_of(fences_.begin(), fences_.end(), [&](const FenceCheck& g) {
      return g.resource == f.resource && g.token != f.token;
    });
    if (clash || (pending_token_ && *pending_token_ != f.token))
      throw InvalidArgumentError(
          fmt::format("two different fence tokens given for resource '{}'", f.resource));
  }
  if (pending_token_ && *pending_token_ == 0)
    throw InvalidArgumentError("fence token 0 was never issued");
  if (idempotency_key_) detail::validate_name("idempotency key", *idempotency_key_);
  detail::validate_duration("lock_timeout", lock_timeout_, detail::max_timeout);

  std::sort(resources_.begin(), resources_.end());
  resources_.erase(std::unique(resources_.begin(), resources_.end()), resources_.end());
  if (pending_token_) {
    fences_.push_back(FenceCheck{resources_.front(), *pending_token_});
    pending_token_.reset();
  }
  std::sort(fences_.begin(), fences_.end(),
            [](const FenceCheck& a, const FenceCheck& b) { return a.resource < b.resource; });
  fences_.erase(std::unique(fences_.begin(), fences_.end(),
                            [](const FenceCheck& a, const FenceCheck& b) {
                              return a.resource == b.resource;
                            }),
                fences_.end());
  normalized_ = true;
}

inline SessionOptions SessionOptions::normalized() const {
  SessionOptions out = *this;
  out.normalize();
  return out;
}

}  // namespace statepact
