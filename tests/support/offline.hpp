// Bad input is refused before any I/O: checked against a backend whose server cannot be reached,
// where any call that got as far as the network would fail as unavailable instead.
#pragma once

#include <string>
#include <vector>

#include <asio/awaitable.hpp>

#include <statepact/statepact.hpp>

#include "expect.hpp"

namespace statepact::test {

// Counts the calls that did not fail with InvalidArgumentError (0 is the pass).
template <class B>
asio::awaitable<int> bad_input_offline(B& b) {
  using std::chrono::milliseconds;
  int wrong = 0;
  auto expect_invalid = [&wrong](auto make) -> asio::awaitable<void> {
    bool invalid = false;
    try {
      co_await make();
    } catch (const InvalidArgumentError&) {
      invalid = true;
    } catch (const Error&) {
    }
    if (!invalid) ++wrong;
  };
  const std::string bad_name = "bad\xff";
  const std::string good = "offline-job";
  const Lease lease{good, "worker-a", 1, {}, milliseconds(30000)};
  co_await expect_invalid([&] { return b.acquire_lease(bad_name, "o", milliseconds(30000)); });
  co_await expect_invalid([&] { return b.acquire_lease(good, "", milliseconds(30000)); });
  co_await expect_invalid([&] { return b.acquire_lease(good, "o", milliseconds(0)); });
  co_await expect_invalid([&] { return b.renew_lease(lease, milliseconds(-5)); });
  co_await expect_invalid([&] { return b.current_fence(std::string(257, 'x')); });
  co_await expect_invalid([&] { return b.register_resource(good, Value(3)); });
  co_await expect_invalid([&] { return b.register_resource("tab\there", Value::object()); });
  co_await expect_invalid([&] { return b.read(good, std::string(1, '\0')); });
  std::vector<std::string> bad_resources{bad_name};
  co_await expect_invalid([&] { return b.snapshot(bad_resources); });
  CommitRequest bad_commit;
  bad_commit.agent_id = "";  // no agent
  bad_commit.resources.push_back(good);
  co_await expect_invalid([&] { return b.commit(bad_commit); });
  co_return wrong;
}

}  // namespace statepact::test
