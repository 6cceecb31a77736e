// Awaitable helpers for tests: what an operation threw, without co_await inside a Catch2 macro.
#pragma once

#include <optional>
#include <stdexcept>

#include <asio/awaitable.hpp>

namespace statepact::test {

// Awaits make() and returns the E it threw, or nothing if it completed. Any other exception
// propagates and fails the test.
template <class E, class F>
asio::awaitable<std::optional<E>> thrown(F make) {
  try {
    co_await make();
  } catch (const E& e) {
    co_return e;
  }
  co_return std::nullopt;
}

}  // namespace statepact::test
