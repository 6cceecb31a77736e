// The network between an in-process client and the memory backend, for `statepact_chaos_client
// memory`: a Backend that forwards every call to a MemoryBackend through a Link the nemesis
// controls, so memory runs meet what only a server's network did before: replies that come late,
// calls that hang, and commits applied whose reply is lost (the client must resend, and storage
// must answer the resend with a replay).
//
// It models Backend but not InlineBackend, so sessions go through the awaitable calls, as with a
// server backend.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include <statepact/backends/memory.hpp>
#include <statepact/errors.hpp>

namespace statepact::chaos {

// What the nemesis sets on one link (half of the clients use each, as with the two relays).
struct Link {
  std::atomic<int> latency_ms{0};           // every call waits this long before and after
  std::atomic<long long> stalled_until{0};  // steady-clock ns: calls wait until then (a partition)
  std::atomic<int> lose_percent{0};         // share of commit replies dropped after the commit ran
  std::atomic<int> late_reply_ms{0};        // commit replies held this long, then dropped
};

class FaultyBackend {
 public:
  FaultyBackend(MemoryBackend& inner, Link& link, std::uint64_t seed)
      : inner_(&inner), link_(&link), rng_(seed) {}

  asio::awaitable<Lease> acquire_lease(std::string resource, std::string owner, milliseconds ttl) {
    co_await on_the_way();
    Lease out = co_await inner_->acquire_lease(std::move(resource), std::move(owner), ttl);
    co_await on_the_way();
    co_return out;
  }
  asio::awaitable<Lease> renew_lease(Lease lease, std::optional<milliseconds> ttl) {
    co_await on_the_way();
    Lease out = co_await inner_->renew_lease(std::move(lease), ttl);
    co_await on_the_way();
    co_return out;
  }
  asio::awaitable<bool> release_lease(Lease lease) {
    co_await on_the_way();
    const bool out = co_await inner_->release_lease(std::move(lease));
    co_await on_the_way();
    co_return out;
  }
  asio::awaitable<Token> current_fence(std::string resource) {
    co_await on_the_way();
    const Token out = co_await inner_->current_fence(std::move(resource));
    co_await on_the_way();
    co_return out;
  }
  asio::awaitable<bool> register_resource(std::string name, Value initial = Value::object(),
                                          ResourcePolicy policy = {}) {
    co_await on_the_way();
    const bool out =
        co_await inner_->register_resource(std::move(name), std::move(initial), policy);
    co_await on_the_way();
    co_return out;
  }
  asio::awaitable<void> set_resource_policy(std::string name, ResourcePolicy policy) {
    co_await on_the_way();
    co_await inner_->set_resource_policy(std::move(name), policy);
    co_await on_the_way();
  }
  asio::awaitable<ResourcePolicy> resource_policy(std::string name) {
    co_await on_the_way();
    ResourcePolicy out = co_await inner_->resource_policy(std::move(name));
    co_await on_the_way();
    co_return out;
  }
  asio::awaitable<Entry> read(std::string resource, std::string key) {
    co_await on_the_way();
    Entry out = co_await inner_->read(std::move(resource), std::move(key));
    co_await on_the_way();
    co_return out;
  }
  asio::awaitable<std::vector<ResourceSnapshot>> snapshot(std::vector<std::string> resources) {
    co_await on_the_way();
    std::vector<ResourceSnapshot> out = co_await inner_->snapshot(std::move(resources));
    co_await on_the_way();
    co_return out;
  }
  asio::awaitable<SessionId> begin_session(std::vector<std::string> resources, Isolation mode) {
    co_await on_the_way();
    const SessionId out = co_await inner_->begin_session(std::move(resources), mode);
    co_await on_the_way();
    co_return out;
  }
  asio::awaitable<Entry> lock(SessionId session, std::string resource, std::string key,
                              LockMode mode, milliseconds timeout) {
    co_await on_the_way();
    Entry out = co_await inner_->lock(session, std::move(resource), std::move(key), mode, timeout);
    co_await on_the_way();
    co_return out;
  }
  void end_session(SessionId session) noexcept { inner_->end_session(session); }
  milliseconds idempotency_retention() const { return inner_->idempotency_retention(); }

  // The commit runs; then its reply may be held past the idempotency retention, or lost, as when
  // the connection breaks after the request was sent. Either way the caller sees
  // CommitUnknownError and must resend to learn the outcome.
  asio::awaitable<CommitResult> commit(CommitRequest req) {
    co_await on_the_way();
    const bool idempotent = req.idempotency_key.has_value();
    const int late = link_->late_reply_ms.load();
    const bool lose = std::uniform_int_distribution<int>(0, 99)(rng_) < link_->lose_percent.load();
    CommitResult out;
    bool refused = false;
    try {
      out = co_await inner_->commit(std::move(req));
    } catch (const Error&) {
      if (!late && !lose) throw;
      refused = true;  // the refusal's reply is lost as well
    }
    if (late > 0) {
      co_await sleep(std::chrono::milliseconds(late));
      throw CommitUnknownError(fmt::format("chaos: the commit's reply was held {} ms, then lost{}",
                                           late, refused ? " (it was a refusal)" : ""),
                               idempotent);
    }
    if (lose)
      throw CommitUnknownError(
          fmt::format("chaos: the commit's reply was lost{}", refused ? " (it was a refusal)" : ""),
          idempotent);
    co_await on_the_way();
    co_return out;
  }

 private:
  static asio::awaitable<void> sleep(std::chrono::nanoseconds d) {
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(asio::use_awaitable);
  }

  // One way across the link: its latency, and a partition's end.
  asio::awaitable<void> on_the_way() {
    const long long until = link_->stalled_until.load();
    const long long now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::steady_clock::now().time_since_epoch())
                              .count();
    if (until > now) co_await sleep(std::chrono::nanoseconds(until - now));
    if (const int ms = link_->latency_ms.load(); ms > 0)
      co_await sleep(std::chrono::milliseconds(ms));
  }

  MemoryBackend* inner_;
  Link* link_;
  std::mt19937_64 rng_;
};

}  // namespace statepact::chaos
