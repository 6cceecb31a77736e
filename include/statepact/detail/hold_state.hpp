// What hold()'s body, its renewal loop and its deadline watch share: the lease as last renewed, its
// schedule (hold_deadline.hpp) and the loss once there is one. They may run on different threads,
// so a mutex guards it all; each call is one decision, taken under the mutex.
#pragma once

#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <statepact/detail/hold_deadline.hpp>
#include <statepact/errors.hpp>
#include <statepact/types.hpp>

namespace statepact::detail {

// The loss the deadline makes: a LeaseLostError saying why, with the renewals' last failure nested
// when they were failing.
inline std::exception_ptr deadline_loss(const Lease& lease, HoldLoss why,
                                        const std::exception_ptr& last_failure) {
  if (why != HoldLoss::failing || !last_failure) {
    const char* reason = why == HoldLoss::unanswered
                             ? "no renewal was answered before the lease's local deadline"
                             : "the lease's local deadline passed without a renewal";
    return std::make_exception_ptr(
        LeaseLostError(lease.resource, lease.owner, lease.token, lease.token, reason));
  }
  std::string why_failed = "unknown error";
  try {
    std::rethrow_exception(last_failure);
  } catch (const std::exception& e) {
    why_failed = e.what();
  } catch (...) {
  }
  try {
    try {
      std::rethrow_exception(last_failure);
    } catch (...) {
      std::throw_with_nested(LeaseLostError(
          lease.resource, lease.owner, lease.token, lease.token,
          "renewals kept failing until the lease's local deadline; last failure: " + why_failed));
    }
  } catch (...) {
    return std::current_exception();
  }
}

class HoldState {
 public:
  HoldState(Lease lease, HoldDeadline plan) : lease_(std::move(lease)), plan_(plan) {}

  Lease lease() const {
    std::lock_guard g(mu_);
    return lease_;
  }
  std::exception_ptr failure() const {
    std::lock_guard g(mu_);
    return failure_;
  }
  steady_time deadline() const {
    std::lock_guard g(mu_);
    return plan_.deadline();
  }
  steady_time next_renewal() const {
    std::lock_guard g(mu_);
    return plan_.next_renewal();
  }

  // A renewal is sent now; empty once the lease is lost (nothing is sent then).
  std::optional<Lease> sending() {
    std::lock_guard g(mu_);
    if (failure_) return std::nullopt;
    plan_.sending();
    return lease_;
  }
  // The renewal sent at `sent` came back at `now` with `lease`: true if it keeps the lease.
  bool renewed(Lease lease, steady_time sent, steady_time now) {
    std::lock_guard g(mu_);
    if (failure_ || !plan_.renewed(sent, lease.ttl, now)) return false;
    lease_ = std::move(lease);
    last_failure_ = nullptr;
    return true;
  }
  // The renewal failed with `e`, a passing failure, at `now`: true if it will be retried.
  bool renewal_failed(std::exception_ptr e, steady_time now) {
    std::lock_guard g(mu_);
    last_failure_ = std::move(e);
    return !failure_ && plan_.failed(now);
  }
  // Storage said the lease is gone (`e`): true if this is the loss (the first one recorded).
  bool lost(std::exception_ptr e) {
    std::lock_guard g(mu_);
    if (failure_) return false;
    failure_ = std::move(e);
    return true;
  }
  // The deadline watch at `now`: true if the deadline passed and this records the loss.
  bool expire(steady_time now) {
    std::lock_guard g(mu_);
    if (failure_ || !plan_.passed(now)) return false;
    failure_ = deadline_loss(lease_, plan_.why(), last_failure_);
    return true;
  }
  // Before the body starts, at `now`: true if the acquisition was answered after the deadline (the
  // loss is then recorded and the body must not run).
  bool answered_late(steady_time now) {
    std::lock_guard g(mu_);
    if (failure_ || !plan_.passed(now)) return false;
    failure_ = std::make_exception_ptr(
        LeaseLostError(lease_.resource, lease_.owner, lease_.token, lease_.token,
                       "the acquisition was answered after the lease's local deadline"));
    return true;
  }

 private:
  mutable std::mutex mu_;
  Lease lease_;
  HoldDeadline plan_;
  std::exception_ptr last_failure_;  // the last renewal's failure, while renewals fail
  std::exception_ptr failure_;       // the loss
};

}  // namespace statepact::detail
