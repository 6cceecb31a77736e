// The two coroutines hold() runs beside its body: one renews the lease, the other enforces the
// local deadline. They are thin drivers: HoldState (hold_state.hpp) decides, they wait, call
// storage and report to the observer. The watch is a coroutine of its own so that the deadline
// holds while a renewal is still in flight: a call already sent completes in its own time.
//
// Each ends only when it found the loss and the body is to be cancelled; otherwise it waits until
// hold() cancels it (std::system_error(asio::error::operation_aborted) then leaves it).
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <system_error>

#include <asio/awaitable.hpp>
#include <asio/error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include <statepact/detail/hold_state.hpp>
#include <statepact/errors.hpp>
#include <statepact/observer.hpp>
#include <statepact/types.hpp>

namespace statepact::detail {

// Waits until cancelled: what a loss without cancel_on_loss, or hold() without renewal, leaves.
inline asio::awaitable<void> park(asio::steady_timer& timer) {
  timer.expires_at(asio::steady_timer::time_point::max());
  co_await timer.async_wait(asio::use_awaitable);
}

inline void notify_held(Observer* observer, LeaseEvent event, const Lease& lease,
                        const ObserverTimer& took) {
  notify_lease(observer, event, lease.resource, lease.owner, lease.token, took);
}

// Renews when the schedule says so (never if hold() does not renew). A renewal answered with
// LeaseLostError is the loss; any other failure is retried sooner, until the deadline watch
// declares the loss.
template <class B>
asio::awaitable<void> renew_held(B* backend, std::shared_ptr<HoldState> state, bool cancel_on_loss,
                                 Observer* observer) {
  using steady = std::chrono::steady_clock;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    timer.expires_at(state->next_renewal());
    co_await timer.async_wait(asio::use_awaitable);
    const std::optional<Lease> held = state->sending();
    if (!held) break;  // the deadline passed meanwhile
    const auto sent = steady::now();
    const ObserverTimer took(observer);
    std::exception_ptr failure;
    bool lost = false;
    try {
      Lease renewed = co_await backend->renew_lease(*held, std::nullopt);
      if (state->renewed(std::move(renewed), sent, steady::now()))
        notify_held(observer, LeaseEvent::renewed, *held, took);
      continue;  // a reply after the deadline: the next round finds the loss
    } catch (const LeaseLostError&) {
      lost = true;
      failure = std::current_exception();
    } catch (const std::system_error& e) {
      if (e.code() == asio::error::operation_aborted) throw;  // hold() is ending
      failure = std::current_exception();
    } catch (...) {
      failure = std::current_exception();
    }
    if (!lost) {
      if (state->renewal_failed(failure, steady::now()))
        notify_held(observer, LeaseEvent::renewal_failed, *held, took);
      continue;
    }
    if (state->lost(failure)) {
      notify_held(observer, LeaseEvent::lost, *held, took);
      if (cancel_on_loss) co_return;
    }
    break;
  }
  co_await park(timer);
}

// Declares the loss when the deadline passes, whatever the renewal loop is doing.
inline asio::awaitable<void> watch_deadline(std::shared_ptr<HoldState> state, bool cancel_on_loss,
                                            Observer* observer) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    timer.expires_at(state->deadline());
    co_await timer.async_wait(asio::use_awaitable);
    if (state->failure()) break;  // the renewal loop found the loss
    const ObserverTimer took(observer);
    if (state->expire(std::chrono::steady_clock::now())) {
      notify_held(observer, LeaseEvent::lost, state->lease(), took);
      if (cancel_on_loss) co_return;
      break;
    }
  }
  co_await park(timer);
}

}  // namespace statepact::detail
