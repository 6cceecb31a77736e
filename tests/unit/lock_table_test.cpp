#include <catch2/catch.hpp>

#include <statepact/detail/lock_errors.hpp>
#include <statepact/detail/lock_table.hpp>

namespace sp = statepact;
using Table = sp::detail::LockTable;
using O = Table::Outcome;
using sp::LockMode;

TEST_CASE("shared locks share, exclusive locks exclude", "[unit][locks]") {
  Table t;
  std::uint64_t ticket = 0;
  CHECK(t.acquire(1, "x", LockMode::shared, ticket) == O::granted);
  CHECK(t.acquire(2, "x", LockMode::shared, ticket) == O::granted);
  CHECK(t.acquire(3, "x", LockMode::exclusive, ticket) == O::must_wait);
  const auto writer = ticket;
  // FIFO: a reader arriving after a queued writer waits too, so writers do not starve.
  CHECK(t.acquire(4, "x", LockMode::shared, ticket) == O::must_wait);
  CHECK(t.release_all(1).empty());
  auto granted = t.release_all(2);
  REQUIRE(granted.size() == 1);
  CHECK(granted[0].session == 3);
  CHECK(granted[0].ticket == writer);
  CHECK(t.holds(3, "x", LockMode::exclusive));
  granted = t.release_all(3);
  REQUIRE(granted.size() == 1);
  CHECK(granted[0].session == 4);
  t.release_all(4);
  CHECK(t.empty());
}

TEST_CASE("holders re-asking are granted, and a sole holder upgrades at once", "[unit][locks]") {
  Table t;
  std::uint64_t ticket = 0;
  CHECK(t.acquire(1, "x", LockMode::exclusive, ticket) == O::granted);
  CHECK(t.acquire(1, "x", LockMode::shared, ticket) == O::granted);
  CHECK(t.holds(1, "x", LockMode::exclusive));
  CHECK(t.acquire(2, "y", LockMode::shared, ticket) == O::granted);
  CHECK(t.acquire(2, "y", LockMode::exclusive, ticket) == O::granted);
  CHECK(t.held_count(1) == 1);
}

TEST_CASE("deadlocks are refused when the cycle forms", "[unit][locks]") {
  Table t;
  std::uint64_t ticket = 0;
  CHECK(t.acquire(1, "x", LockMode::exclusive, ticket) == O::granted);
  CHECK(t.acquire(2, "y", LockMode::exclusive, ticket) == O::granted);
  CHECK(t.acquire(1, "y", LockMode::exclusive, ticket) == O::must_wait);
  CHECK(t.acquire(2, "x", LockMode::exclusive, ticket) == O::deadlock);
  // The refused request left no trace: releasing 2 grants 1 its wait.
  auto granted = t.release_all(2);
  REQUIRE(granted.size() == 1);
  CHECK(granted[0].session == 1);

  // Two readers both upgrading is the classic conversion deadlock.
  Table u;
  CHECK(u.acquire(1, "k", LockMode::shared, ticket) == O::granted);
  CHECK(u.acquire(2, "k", LockMode::shared, ticket) == O::granted);
  CHECK(u.acquire(1, "k", LockMode::exclusive, ticket) == O::must_wait);
  CHECK(u.acquire(2, "k", LockMode::exclusive, ticket) == O::deadlock);

  // A longer cycle: 1 -> 2 -> 3 -> 1.
  Table v;
  CHECK(v.acquire(1, "a", LockMode::exclusive, ticket) == O::granted);
  CHECK(v.acquire(2, "b", LockMode::exclusive, ticket) == O::granted);
  CHECK(v.acquire(3, "c", LockMode::exclusive, ticket) == O::granted);
  CHECK(v.acquire(1, "b", LockMode::exclusive, ticket) == O::must_wait);
  CHECK(v.acquire(2, "c", LockMode::exclusive, ticket) == O::must_wait);
  CHECK(v.acquire(3, "a", LockMode::exclusive, ticket) == O::deadlock);
}

TEST_CASE("a cancelled wait leaves the queue and may let others in", "[unit][locks]") {
  Table t;
  std::uint64_t ticket = 0;
  CHECK(t.acquire(1, "x", LockMode::shared, ticket) == O::granted);
  CHECK(t.acquire(2, "x", LockMode::exclusive, ticket) == O::must_wait);
  CHECK(t.acquire(3, "x", LockMode::shared, ticket) == O::must_wait);
  auto granted = t.cancel_wait(2, "x");
  REQUIRE(granted.size() == 1);
  CHECK(granted[0].session == 3);
  t.release_all(1);
  t.release_all(3);
  CHECK(t.empty());
}

TEST_CASE("try_acquire grants only what needs no wait, and otherwise changes nothing",
          "[unit][locks]") {
  Table t;
  std::uint64_t ticket = 0;
  CHECK(t.try_acquire(1, "x", LockMode::exclusive));
  CHECK(t.try_acquire(1, "x", LockMode::shared));  // already held, stronger
  CHECK_FALSE(t.try_acquire(2, "x", LockMode::shared));
  CHECK(t.held_count(2) == 0);
  CHECK(t.acquire(3, "x", LockMode::shared, ticket) == O::must_wait);
  // A refused try leaves no queue entry: only the waiter that really waits is granted.
  auto granted = t.release_all(1);
  REQUIRE(granted.size() == 1);
  CHECK(granted[0].session == 3);
  // A free shared lock is shared; a queued writer keeps later readers out (FIFO).
  CHECK(t.try_acquire(2, "x", LockMode::shared));
  CHECK(t.acquire(4, "x", LockMode::exclusive, ticket) == O::must_wait);
  CHECK_FALSE(t.try_acquire(5, "x", LockMode::shared));
  // The sole holder upgrades in place; its key is recorded once.
  CHECK(t.try_acquire(6, "y", LockMode::shared));
  CHECK(t.try_acquire(6, "y", LockMode::exclusive));
  CHECK(t.held_count(6) == 1);
  t.release_all(2);
  t.release_all(3);
  t.release_all(4);
  t.release_all(6);
  CHECK(t.empty());
}

TEST_CASE("lock errors: one wording for every backend, both retryable", "[unit][lock-table]") {
  const auto deadlock =
      statepact::detail::lock_deadlock(statepact::LockMode::exclusive, "accounts", "alice");
  CHECK(std::string(deadlock.what()) ==
        "deadlock: waiting for an exclusive lock on resource 'accounts' key 'alice' would close "
        "a wait cycle");
  CHECK(deadlock.retryable());
  const auto timeout = statepact::detail::lock_timed_out(std::chrono::milliseconds(250),
                                                         statepact::LockMode::shared, "a", "k");
  CHECK(std::string(timeout.what()) ==
        "timed out after 250 ms waiting for a shared lock on resource 'a' key 'k'");
  CHECK(timeout.retryable());
  CHECK(timeout.code() == statepact::ErrorCode::lock_timeout);
}
