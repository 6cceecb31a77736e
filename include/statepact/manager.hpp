// The entry point of the seed's `manager`: leases that register their resource, sessions, and
// run() which re-runs a whole transaction on retryable errors.
#pragma once

#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include <statepact/backend.hpp>
#include <statepact/detail/validate.hpp>
#include <statepact/errors.hpp>
#include <statepact/retry.hpp>
#include <statepact/session.hpp>
#include <statepact/session_options.hpp>

namespace statepact {

namespace detail {
template <class T>
struct awaitable_value;
template <class T>
struct awaitable_value<asio::awaitable<T>> {
  using type = T;
};
}  // namespace detail

template <Backend B>
class Manager {
 public:
  explicit Manager(B& backend) : backend_(&backend) {}

  B& backend() const { return *backend_; }

  asio::awaitable<bool> register_resource(std::string name, Value initial_state = Value::object()) {
    return backend_->register_resource(std::move(name), std::move(initial_state));
  }

  // Registers the resource with an empty state if needed, so a lease works before any session.
  asio::awaitable<Lease> lease(std::string resource, std::string owner,
                               milliseconds ttl = std::chrono::seconds(30)) {
    // Check all input before registering: bad input must change nothing.
    detail::validate_name("resource name", resource);
    detail::validate_name("owner", owner);
    detail::validate_ttl(ttl);
    co_await backend_->register_resource(resource, Value::object());
    co_return co_await backend_->acquire_lease(std::move(resource), std::move(owner), ttl);
  }

  asio::awaitable<Session<B>> session(SessionOptions options) {
    options.normalize();
    SessionId id;
    if constexpr (InlineBackend<B>)
      id = backend_->begin_session_now(options.resources(), options.isolation());
    else
      id = co_await backend_->begin_session(options.resources(), options.isolation());
    co_return Session<B>(*backend_, std::move(options), id);
  }

  // Runs fn(session) in a fresh session and commits unless fn did; on a retryable error waits
  // (exponential backoff, full jitter) and runs fn again from the start on fresh state. Returns
  // what fn returns; non-retryable errors and the last error once attempts run out propagate.
  template <class F>
  auto run(SessionOptions options, F fn, RetryPolicy policy = RetryPolicy()) -> asio::awaitable<
      typename detail::awaitable_value<std::invoke_result_t<F&, Session<B>&>>::type> {
    using R = typename detail::awaitable_value<std::invoke_result_t<F&, Session<B>&>>::type;
    const SessionOptions normalized = options.normalized();  // bad options fail before attempt 1
    for (int attempt = 1;; ++attempt) {
      try {
        Session<B> s = co_await session(normalized);
        if constexpr (std::is_void_v<R>) {
          co_await fn(s);
          if (s.active()) co_await s.commit();
          co_return;
        } else {
          R value = co_await fn(s);
          if (s.active()) co_await s.commit();
          co_return value;
        }
      } catch (const Error& e) {
        if (!e.retryable() || attempt >= policy.max_attempts()) throw;
      }
      // No co_await inside a handler: wait here, then start over.
      asio::steady_timer timer(co_await asio::this_coro::executor, policy.delay(attempt));
      co_await timer.async_wait(asio::use_awaitable);
    }
  }

 private:
  B* backend_;
};

}  // namespace statepact
