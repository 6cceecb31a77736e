// The Redis lock wait's decisions with no server and no clock: when the wait record and the place
// in the key's queue exist and must be removed, the doubling jittered backoff, and the deadline.
#include <catch2/catch.hpp>

#include <chrono>

#include "lock_poll.hpp"  // src/redis

namespace d = statepact::detail;
using std::chrono::milliseconds;

TEST_CASE("lock poll: a record exists from the first wait until a deadlock removes it",
          "[lock_poll][redis]") {
  const auto t0 = d::LockPoll::clock::time_point{} + std::chrono::hours(1);
  d::LockPoll poll(t0 + milliseconds(100), 1);
  CHECK_FALSE(poll.recorded());
  CHECK_FALSE(poll.queued());
  SECTION("granted at once: nothing to clean up") {
    CHECK(poll.on_lock(d::Verdict::ok));
    CHECK_FALSE(poll.recorded());
    CHECK_FALSE(poll.queued());
  }
  SECTION("refused at once (not registered): nothing to clean up") {
    CHECK(poll.on_lock(d::Verdict::resource_not_found));
    CHECK_FALSE(poll.recorded());
    CHECK_FALSE(poll.queued());
  }
  SECTION("granted after waiting: the record must go, the grant left the queue") {
    CHECK_FALSE(poll.on_lock(d::Verdict::wait));
    CHECK(poll.recorded());
    CHECK(poll.queued());
    CHECK_FALSE(poll.on_wait(d::Verdict::ok));
    CHECK(poll.on_lock(d::Verdict::ok));
    CHECK(poll.recorded());
    CHECK_FALSE(poll.queued());
  }
  SECTION("a deadlock ends the wait: the script removed the record, the place in the queue stays") {
    CHECK_FALSE(poll.on_lock(d::Verdict::wait));
    CHECK(poll.on_wait(d::Verdict::deadlock));
    CHECK_FALSE(poll.recorded());
    CHECK(poll.queued());
  }
  SECTION("a lock call whose answer is lost may have queued: its place must go") {
    poll.on_lock_sent();
    CHECK(poll.queued());
    CHECK_FALSE(poll.recorded());
  }
  SECTION("a lock call answered with a grant or a refusal left no place in the queue") {
    poll.on_lock_sent();
    CHECK(poll.on_lock(d::Verdict::ok));
    CHECK_FALSE(poll.queued());
    poll.on_lock_sent();
    CHECK(poll.on_lock(d::Verdict::resource_not_found));
    CHECK_FALSE(poll.queued());
  }
  SECTION("a timeout after waiting leaves both to remove") {
    CHECK_FALSE(poll.on_lock(d::Verdict::wait));
    CHECK_FALSE(poll.on_wait(d::Verdict::wait));
    CHECK_FALSE(poll.next_delay(t0 + milliseconds(100)));
    CHECK(poll.recorded());
    CHECK(poll.queued());
  }
}

TEST_CASE("lock poll: the backoff doubles to its cap, jittered, and stops at the deadline",
          "[lock_poll][redis]") {
  const auto t0 = d::LockPoll::clock::time_point{} + std::chrono::hours(1);
  d::LockPoll poll(t0 + milliseconds(1000), 42);
  milliseconds cap = d::LockPoll::first_backoff;
  for (int i = 0; i < 8; ++i) {
    const auto delay = poll.next_delay(t0);
    REQUIRE(delay);
    INFO("poll " << i << ", cap " << cap.count() << " ms");
    CHECK(*delay >= cap / 2);
    CHECK(*delay <= cap);
    cap = std::min(cap * 2, d::LockPoll::max_backoff);
  }
  CHECK(cap == d::LockPoll::max_backoff);
  // Never past the deadline, and nothing once it has passed.
  const auto near = poll.next_delay(t0 + milliseconds(999));
  REQUIRE(near);
  CHECK(*near <= milliseconds(1));
  CHECK_FALSE(poll.next_delay(t0 + milliseconds(1000)));
  CHECK_FALSE(poll.next_delay(t0 + milliseconds(5000)));
}

TEST_CASE("lock poll: two pollers with different seeds do not keep the same rhythm",
          "[lock_poll][redis]") {
  const auto t0 = d::LockPoll::clock::time_point{} + std::chrono::hours(1);
  d::LockPoll a(t0 + std::chrono::hours(1), 1), b(t0 + std::chrono::hours(1), 2);
  int differ = 0;
  for (int i = 0; i < 20; ++i) differ += *a.next_delay(t0) != *b.next_delay(t0);
  CHECK(differ > 0);
}
