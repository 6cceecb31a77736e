// A backend whose lease acquisitions and renewals are answered late, as over a slow or congested
// link: the call reaches storage at once, and its reply (or its failure) comes back after a set
// delay. Built on FaultyBackend, so renewals can also fail (FaultyBackend::renewals_failing; the
// failure then also comes back late). It records when each acquisition and renewal was sent, and
// when storage had applied the acquisition. One thread only: the records are not synchronized.
#pragma once

#include <chrono>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <asio/awaitable.hpp>

#include "faulty_backend.hpp"
#include "sleep.hpp"

namespace statepact::test {

template <Backend Inner>
class SlowBackend : public FaultyBackend<Inner> {
  using Base = FaultyBackend<Inner>;
  using steady = std::chrono::steady_clock;

 public:
  explicit SlowBackend(Inner& inner) : Base(inner) {}

  milliseconds acquire_delay{0};  // every acquisition's reply comes this much later
  milliseconds renew_delay{0};    // every renewal's reply (or failure) comes this much later

  std::vector<steady::time_point> acquires_sent;  // when acquire_lease was called
  std::vector<steady::time_point>
      acquires_applied;  // when storage had answered it, before the delay
  std::vector<steady::time_point> renewals_started;  // when renew_lease was called

  asio::awaitable<Lease> acquire_lease(std::string resource, std::string owner,
                                       milliseconds ttl = std::chrono::seconds(30)) {
    acquires_sent.push_back(steady::now());
    std::exception_ptr failure;
    Lease lease;
    try {
      lease = co_await Base::acquire_lease(std::move(resource), std::move(owner), ttl);
    } catch (...) {
      failure = std::current_exception();
    }
    acquires_applied.push_back(steady::now());
    co_await sleep_for(acquire_delay);
    if (failure) std::rethrow_exception(failure);
    co_return lease;
  }

  asio::awaitable<Lease> renew_lease(Lease lease, std::optional<milliseconds> ttl = std::nullopt) {
    renewals_started.push_back(steady::now());
    std::exception_ptr failure;
    Lease renewed;
    try {
      renewed = co_await Base::renew_lease(std::move(lease), ttl);
    } catch (...) {
      failure = std::current_exception();
    }
    co_await sleep_for(renew_delay);
    if (failure) std::rethrow_exception(failure);
    co_return renewed;
  }
};

}  // namespace statepact::test
