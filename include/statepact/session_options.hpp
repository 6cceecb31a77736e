// What a session is for: who, which resources, which isolation, which fence. A non-aggregate with
// chainable setters, because g++ 12 mishandles braced lists and aggregate temporaries in co_await.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <statepact/commit_request.hpp>
#include <statepact/errors.hpp>
#include <statepact/types.hpp>

namespace statepact {

class SessionOptions {
 public:
  explicit SessionOptions(std::string agent_id) : agent_id_(std::move(agent_id)) {}

  SessionOptions& resource(std::string name) {
    resources_.push_back(std::move(name));
    return *this;
  }
  SessionOptions& resources(const std::vector<std::string>& names) {
    resources_.insert(resources_.end(), names.begin(), names.end());
    return *this;
  }
  SessionOptions& isolation(Isolation i) {
    isolation_ = i;
    return *this;
  }
  // A token for a single-resource session.
  SessionOptions& fence(Token token) {
    pending_token_ = token;
    return *this;
  }
  SessionOptions& fence(std::string resource, Token token) {
    fences_.push_back(FenceCheck{std::move(resource), token});
    return *this;
  }
  SessionOptions& fence(const Lease& lease) { return fence(lease.resource, lease.token); }
  SessionOptions& idempotency_key(std::string key) {
    idempotency_key_ = std::move(key);
    return *this;
  }
  SessionOptions& lock_timeout(milliseconds d) {
    lock_timeout_ = d;
    return *this;
  }

  const std::string& agent_id() const { return agent_id_; }
  const std::vector<std::string>& resources() const { return resources_; }
  Isolation isolation() const { return isolation_; }
  const std::vector<FenceCheck>& fences() const { return fences_; }
  const std::optional<std::string>& idempotency_key() const { return idempotency_key_; }
  milliseconds lock_timeout() const { return lock_timeout_; }

  // Checks everything that needs no I/O and resolves a bare token to the single resource.
  // Throws InvalidArgumentError; the options are unchanged when it throws.
  SessionOptions normalized() const;

 private:
  std::string agent_id_;
  std::vector<std::string> resources_;
  Isolation isolation_ = Isolation::optimistic;
  std::optional<Token> pending_token_;
  std::vector<FenceCheck> fences_;
  std::optional<std::string> idempotency_key_;
  milliseconds lock_timeout_{5000};
};

}  // namespace statepact

#include <statepact/detail/validate.hpp>

namespace statepact {

inline SessionOptions SessionOptions::normalized() const {
  SessionOptions out = *this;
  detail::validate_name("agent id", agent_id_);
  if (resources_.empty())
    throw InvalidArgumentError(fmt::format(
        "session of agent '{}' names no resource; add one with .resource(name)", agent_id_));
  for (const auto& r : resources_) detail::validate_name("resource name", r);
  std::sort(out.resources_.begin(), out.resources_.end());
  out.resources_.erase(std::unique(out.resources_.begin(), out.resources_.end()),
                       out.resources_.end());
  if (pending_token_) {
    if (out.resources_.size() != 1)
      throw InvalidArgumentError(fmt::format(
          "fence(token) needs a single-resource session, but this one has {} resources; use "
          "fence(resource, token)",
          out.resources_.size()));
    out.fences_.push_back(FenceCheck{out.resources_.front(), *pending_token_});
    out.pending_token_.reset();
  }
  for (const auto& f : out.fences_) {
    if (!std::binary_search(out.resources_.begin(), out.resources_.end(), f.resource))
      throw InvalidArgumentError(
          fmt::format("fence names resource '{}', which is not one of the session's", f.resource));
    if (f.token == 0) throw InvalidArgumentError("fence token 0 was never issued");
    for (const auto& g : out.fences_)
      if (&g != &f && g.resource == f.resource && g.token != f.token)
        throw InvalidArgumentError(
            fmt::format("two different fence tokens given for resource '{}'", f.resource));
  }
  if (idempotency_key_) detail::validate_name("idempotency key", *idempotency_key_);
  if (lock_timeout_ <= milliseconds::zero())
    throw InvalidArgumentError("lock_timeout must be positive");
  return out;
}

}  // namespace statepact
