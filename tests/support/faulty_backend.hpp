// A backend that wraps another and injects the faults a real transport shows: a commit applied
// whose reply is lost, a commit lost before it reached storage, and renewals that throw what a
// server answers while it restarts; a resend that fails as a commit waiting for a lock does; and a
// retention shorter than the inner backend's. Everything else is passed through unchanged.
#pragma once

#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include <statepact/backend.hpp>
#include <statepact/errors.hpp>

namespace statepact::test {

template <Backend Inner>
class FaultyBackend {
 public:
  explicit FaultyBackend(Inner& inner) : inner_(&inner) {}

  int commits_applied_then_unknown = 0;  // the next n commits are applied, then reported unknown
  int commits_lost_unknown = 0;          // the next n commits never arrive, reported unknown
  int commits_unavailable = 0;  // after those, the next n find the server down: nothing sent
  int commits_failing = 0;      // after those, the next n throw commit_failure: nothing applied
  std::exception_ptr commit_failure;
  milliseconds lost_reply_delay{0};       // how long a commit whose reply is lost takes to fail
  std::optional<milliseconds> retention;  // what idempotency_retention() claims; unset: inner's
  int renewals_failing = 0;               // the next n renewals throw renewal_failure's text
  std::string renewal_failure = "LOADING Redis is loading the dataset in memory";
  int commits_sent = 0;
  int renewals_sent = 0;

  asio::awaitable<Lease> acquire_lease(std::string resource, std::string owner,
                                       milliseconds ttl = std::chrono::seconds(30)) {
    return inner_->acquire_lease(std::move(resource), std::move(owner), ttl);
  }
  asio::awaitable<Lease> renew_lease(Lease lease, std::optional<milliseconds> ttl = std::nullopt) {
    ++renewals_sent;
    if (renewals_failing > 0) {
      --renewals_failing;
      throw std::runtime_error(renewal_failure);  // a foreign exception, as a buggy transport's
    }
    co_return co_await inner_->renew_lease(std::move(lease), ttl);
  }
  asio::awaitable<bool> release_lease(Lease lease) {
    return inner_->release_lease(std::move(lease));
  }
  asio::awaitable<Token> current_fence(std::string resource) {
    return inner_->current_fence(std::move(resource));
  }
  asio::awaitable<bool> register_resource(std::string name, Value initial = Value::object(),
                                          ResourcePolicy policy = {}) {
    return inner_->register_resource(std::move(name), std::move(initial), policy);
  }
  asio::awaitable<void> set_resource_policy(std::string name, ResourcePolicy policy) {
    return inner_->set_resource_policy(std::move(name), policy);
  }
  asio::awaitable<ResourcePolicy> resource_policy(std::string name) {
    return inner_->resource_policy(std::move(name));
  }
  asio::awaitable<Entry> read(std::string resource, std::string key) {
    return inner_->read(std::move(resource), std::move(key));
  }
  asio::awaitable<std::vector<ResourceSnapshot>> snapshot(std::vector<std::string> resources) {
    return inner_->snapshot(std::move(resources));
  }
  asio::awaitable<SessionId> begin_session(std::vector<std::string> resources, Isolation mode) {
    return inner_->begin_session(std::move(resources), mode);
  }
  asio::awaitable<Entry> lock(SessionId session, std::string resource, std::string key,
                              LockMode mode, milliseconds timeout) {
    return inner_->lock(session, std::move(resource), std::move(key), mode, timeout);
  }
  void end_session(SessionId session) noexcept { inner_->end_session(session); }

  asio::awaitable<CommitResult> commit(CommitRequest req) {
    ++commits_sent;
    const bool keyed = req.idempotency_key.has_value();
    if (commits_lost_unknown > 0) {
      --commits_lost_unknown;
      throw CommitUnknownError("test: the commit was lost on its way", keyed);
    }
    const bool lose_reply = commits_applied_then_unknown > 0;
    if (!lose_reply && commits_unavailable > 0) {
      --commits_unavailable;
      throw BackendUnavailableError("test: the server is down");
    }
    if (!lose_reply && commits_failing > 0) {
      --commits_failing;
      std::rethrow_exception(commit_failure);
    }
    if (lose_reply) --commits_applied_then_unknown;
    CommitResult result = co_await inner_->commit(std::move(req));
    if (lose_reply) {
      if (lost_reply_delay > milliseconds::zero()) {
        asio::steady_timer t(co_await asio::this_coro::executor, lost_reply_delay);
        co_await t.async_wait(asio::use_awaitable);
      }
      throw CommitUnknownError("test: the commit's reply was lost", keyed);
    }
    co_return result;
  }
  milliseconds idempotency_retention() const {
    return retention.value_or(inner_->idempotency_retention());
  }

 private:
  Inner* inner_;
};

}  // namespace statepact::test
